"""The SM90 FP8 configuration choice (cpp/deep_gemm/heuristics/sm90_fp8_gemm.hpp) and what a
chosen configuration compiles and loads (cpp/deep_gemm/launch/sm90_fp8_source.hpp), both pure
C++17, compiled as host C++ and checked on the CPU: the persistent grid of the dense GEMMs is
the fewest CTAs that keep the number of tile waves (every CTA runs the same number of tiles,
give or take one), the contiguous grouped layout keeps every SM, masked launches every SM."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CPP = REPO / "cpp"
HEURISTICS = CPP / "deep_gemm" / "heuristics" / "sm90_fp8_gemm.hpp"
CXX = shutil.which("g++") or shutil.which("c++")

DENSE = [(m, n, k) for m in (1, 128, 129, 4096, 4097) for n, k in ((2112, 7168), (24576, 1536), (7168, 16384),
                                                                      (4096, 7168), (7168, 2048), (576, 7168))]
SMS = (132, 114, 78, 8)

DRIVER = r"""
#include <cstdio>
#include <string>
#include "deep_gemm/heuristics/sm90_fp8_gemm.hpp"
using namespace deep_gemm::heuristics;
int main() {
  int m, n, k, sms, fp32;
  char kind[16];
  while (std::scanf("%15s %d %d %d %d %d", kind, &m, &n, &k, &sms, &fp32) == 6) {
    const std::string what(kind);
    Sm90Fp8GemmConfig c;
    if (what == "dense") c = choose_sm90_fp8_gemm_config(m, n, k, sms, fp32 != 0);
    else c = rank_sm90_fp8_grouped_configs(what == "contiguous" ? 1 : 2, m, what == "contiguous" ? 1 : 4, n, k, sms,
                                           128).front();
    std::printf("%s %d %d %d %d %d %d %d %d %d\n", kind, m, n, k, sms, fp32, c.block_m, c.block_n, c.cluster, c.grid_x);
  }
}
"""


def _run_driver(tmp: Path, name: str, source: str, stdin: str | None = None) -> str:
    """Compiles a C++ driver of the heuristics (and launch-source) headers and returns what it prints."""
    if CXX is None or not HEURISTICS.exists():
        pytest.skip("needs a host C++ compiler and the source tree")
    (tmp / f"{name}.cpp").write_text(source)
    exe = tmp / name
    build = subprocess.run([CXX, "-std=c++17", "-O1", f"-I{CPP}", str(tmp / f"{name}.cpp"), "-o", str(exe)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], input=stdin, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.fixture(scope="module")
def configs(tmp_path_factory) -> list[tuple]:
    queries = [f"dense {m} {n} {k} {s} {f}" for m, n, k in DENSE for s in SMS for f in (0, 1)]
    queries += [f"contiguous {m} {n} {k} {s} 0" for m in (34048, 34304, 4096, 640) for n, k in ((7168, 2048), (4096, 7168))
                for s in SMS]
    queries += [f"masked {m} 7168 3072 {s} 0" for m in (256, 1024, 4096) for s in SMS]
    stdout = _run_driver(tmp_path_factory.mktemp("heuristics"), "driver", DRIVER, "\n".join(queries) + "\n")
    rows = []
    for line in stdout.splitlines():
        kind, *nums = line.split()
        rows.append((kind, *map(int, nums)))
    assert len(rows) == len(queries)
    return rows


def test_dense_grid_keeps_the_waves_with_the_fewest_ctas(configs):
    dense = [r for r in configs if r[0] == "dense"]
    for _, m, n, k, sms, fp32, bm, bn, cluster, grid in dense:
        tiles = math.ceil(m / bm) * math.ceil(n / bn)
        where = f"{m}x{n}x{k} fp32_out={fp32} on {sms} SMs: {bm}x{bn}, cluster {cluster}, grid {grid}, {tiles} tiles"
        assert 0 < grid <= sms and grid % cluster == 0, where
        waves = math.ceil(tiles / (sms // cluster * cluster))
        assert math.ceil(tiles / grid) == waves, where
        assert grid == cluster or math.ceil(tiles / (grid - cluster)) > waves, where  # the fewest such CTAs


def test_dense_bench_shapes_take_full_waves(configs):
    # The measured cases (H200, 2026-12-01): 896 tiles of 256x128 on 128 CTAs, 352 of
    # 128x192 on 118.
    grids = {(m, n, k): (bm, bn, grid) for kind, m, n, k, sms, fp32, bm, bn, _, grid in configs
             if kind == "dense" and sms == 132 and fp32 == 0}
    assert grids[(4096, 7168, 16384)] == (256, 128, 128)
    assert grids[(4096, 7168, 2048)] == (256, 128, 128)
    assert grids[(4096, 2112, 7168)] == (128, 192, 118)


def test_grouped_grids_are_not_balanced(configs):
    for kind, m, n, k, sms, _, bm, bn, _, grid in configs:
        if kind == "contiguous":
            assert grid == min(sms, math.ceil(m / bm) * math.ceil(n / bn)), (m, n, k, sms, bm, bn, grid)
        elif kind == "masked":
            assert grid == sms, (m, n, k, sms, grid)


SFA_DRIVER = r"""
#include <cstdio>
#include <utility>
#include "deep_gemm/launch/sm90_fp8_source.hpp"
using namespace deep_gemm::heuristics;
using namespace deep_gemm::launch;
int main() {
  const std::pair<int, int> nks[] = {{2112, 7168}, {24576, 1536}, {256, 512}, {7168, 16384}};
  for (int fp32 : {0, 1})
    for (int m : {1, 16, 64, 65, 128, 384, 385})
      for (const auto& [n, k] : nks) {
        Sm90Fp8GemmConfig c = choose_sm90_fp8_gemm_config(m, n, k, 132, fp32 != 0);
        const bool fits = sm90_fp8_sfa_from_global_fits(c, m);
        Sm90Fp8GemmConfig pair = c;
        pair.cluster = 2;
        c.sfa_from_global = fits;
        const bool takes_pointer =
            sm90_fp8_kernel_source(sm90_fp8_gemm_kernel(c, 0, n, k)).find("const float* sfa,") != std::string::npos;
        std::printf("%d %d %d %d %d %d %zu %d %d %d\n", fp32, m, n, k, int(c.mma_overlap), int(fits),
                    sm90_fp8_gemm_tensor_maps(c, m, n, k, k, k, n).size(), int(takes_pointer),
                    int(sm90_fp8_sfa_from_global_fits(pair, m)), c.block_m);
      }
}
"""


def test_per_token_scales_are_read_as_given_only_by_small_m_bf16_kernels(tmp_path):
    """M <= 384, bf16 out, one slab per warpgroup (block_m <= 128, overlapped or plain
    schedule), cluster 1: the kernel takes the SFA pointer and strides (no SFA tensor map);
    everything else keeps the TMA-loaded layout."""
    rows = [tuple(map(int, line.split())) for line in _run_driver(tmp_path, "sfa", SFA_DRIVER).splitlines()]
    assert len(rows) == 56
    for fp32, m, n, k, _overlap, fits, maps, takes_pointer, pair_fits, block_m in rows:
        assert fits == (not fp32 and m <= 384 and block_m <= 128), (fp32, m, n, k)
        loaded = -(-m // block_m) * block_m
        tail = m > block_m and loaded - m >= 48 and (loaded - m) * 8 >= loaded  # (test_boxes_...)
        tail_maps = (1 if fits else 2) if tail else 0  # A's, and SFA's unless read as given
        assert maps == (3 if fits else 4) + tail_maps and takes_pointer == fits and pair_fits == 0, (fp32, m, n, k)
    # Seen: the overlapped and the plain schedule reading them, and a bf16 M past the limit.
    assert any(r[5] and r[4] for r in rows) and any(r[5] and not r[4] for r in rows)
    assert any(r[1] > 384 and not r[0] and not r[5] for r in rows)


BOX_DRIVER = r"""
#include <cstdio>
#include "deep_gemm/launch/sm90_fp8_source.hpp"
using namespace deep_gemm::heuristics;
using namespace deep_gemm::launch;
int main() {
  for (int fp32 : {0, 1})
    for (int m : {1, 7, 8, 9, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256, 257, 4096, 4097})
      for (int cluster : {1, 2})
        for (const auto& c : rank_sm90_fp8_gemm_configs(m, 4096, 7168, 132, fp32 != 0, kSm90MaxSmemBytes, true)) {
          if (c.cluster != cluster) continue;
          const auto maps = sm90_fp8_gemm_tensor_maps(c, m, 4096, 7168, 7168, 7168, 4096);
          const auto kernel = sm90_fp8_gemm_kernel(c, 0, 4096, 7168);
          const std::string name = sm90_fp8_kernel_name(kernel), src = sm90_fp8_kernel_source(kernel);
          const bool takes_maps = src.find("CUtensorMap tmap_a_tail, const __grid_constant__ CUtensorMap tmap_sfa_tail") !=
                                  std::string::npos;
          std::printf("%d %d %d %d %zu %u %u %u %u %d %d %d %d %d\n", fp32, m, cluster, c.block_m, maps.size(),
                      maps[0].box_outer, maps[2].box_inner, maps.size() == 6 ? maps[4].box_outer : 0,
                      maps.size() == 6 ? maps[5].box_inner : 0, int(name.find("_fm") != std::string::npos),
                      int(src.find("MBoxes::kFitM>") != std::string::npos), int(name.find("_tm") != std::string::npos),
                      int(src.find("MBoxes::kTail>") != std::string::npos), int(takes_maps));
          break;
        }
}
"""


def _fit_rows(rows: int) -> tuple[int, int]:
    return -(-rows // 8) * 8, -(-rows // 4) * 4  # A to 8 rows, SFA to 4


def test_boxes_cover_only_the_rows_that_exist(tmp_path):
    """Dense GEMMs, cluster 1. M < BLOCK_M: A and SFA boxes of the rows that exist (A rounded
    up to 8, SFA to 4), in a kernel of its own ("_fm"). M > BLOCK_M where BLOCK_M-row boxes
    would bring at least 48 rows of the last m-block and 1/8 of all their rows from past M:
    the last m-block loads through two more tensor maps with such boxes ("_tm"). Each kernel expects its boxes' bytes per stage.
    Otherwise, and for cluster pairs, BLOCK_M rows (per CTA of the pair for A)."""
    rows = [tuple(map(int, line.split())) for line in _run_driver(tmp_path, "box", BOX_DRIVER).splitlines()]
    assert len(rows) == 68
    for (fp32, m, cluster, block_m, num_maps, a_rows, sfa_rows, tail_a, tail_sfa, fm_named, fm_templated, tm_named,
         tm_templated, takes_tail_maps) in rows:
        where = (fp32, m, cluster, block_m)
        loaded = -(-m // block_m) * block_m
        fit = cluster == 1 and m < block_m
        tail = cluster == 1 and m > block_m and loaded - m >= 48 and (loaded - m) * 8 >= loaded
        assert (a_rows, sfa_rows) == (_fit_rows(m) if fit else (block_m // cluster, block_m)), where
        assert num_maps == (6 if tail else 4), where
        if tail:
            assert (tail_a, tail_sfa) == _fit_rows(m - loaded + block_m), where
        assert fm_named == fm_templated == fit, where
        assert tm_named == tm_templated == takes_tail_maps == tail, where
    assert any(r[11] for r in rows) and any(r[9] for r in rows)  # both kinds seen
    assert any(r[1] > r[3] and r[1] % r[3] and not r[11] for r in rows)  # little past M: no tail maps
