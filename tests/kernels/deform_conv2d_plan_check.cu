// Host-only check of the DeformConv2d kernels' plans (runs without a GPU; tests/kernels/test_deform_conv2d_plan.py
// builds and runs it): the fused kernel's reduction-block order as it walks it (FusedParams::advance from any block)
// against FusedParams::at per block and at()'s inverse (blockOf, where the weight reorder puts a tap's tile); the cut
// of the fused kernel's tiles (fusedSplit) into whole tiles and pieces of a tail; the float32 split sampler's taps per
// block (groupTaps). A failed check prints "FAIL <what>"; then one line per benchmark case:
//     case <name> tiles=<t> whole=<w> pieces=<p> blocks=<b>
// the split sampler's line, and last "checked <n> orders and splits, <f> failed".
#include "kernels/deform_conv2d.cu"

#include <cstdio>
#include <vector>

namespace {

using namespace torchtrt_ext::deform_conv2d_detail;

int64_t checked = 0, failed = 0;

void expect(bool ok, char const* what, int64_t a, int64_t b, int64_t c) {
    ++checked;
    if (!ok) {
        ++failed;
        if (failed <= 20) std::printf("FAIL %s (%lld, %lld, %lld)\n", what, static_cast<long long>(a),
                                      static_cast<long long>(b), static_cast<long long>(c));
    }
}

FusedParams paramsOf(int taps, int cblocks) {
    FusedParams f{};
    f.taps = taps;
    f.cblocks = cblocks;
    f.k_blocks = taps * cblocks;
    return f;
}

// Every block is one (tap, channel block), each pair once; walking from any block gives at() of the blocks after it.
void checkOrder(int taps, int cblocks) {
    FusedParams const f = paramsOf(taps, cblocks);
    std::vector<int> seen(static_cast<size_t>(f.k_blocks), 0);
    for (int start = 0; start < f.k_blocks; ++start) {
        FusedCursor c = f.at(start);
        bool const inside = c.tap() >= 0 && c.tap() < taps && c.cb >= 0 && c.cb < cblocks;
        expect(inside, "at() inside the taps and channel blocks", taps, cblocks, start);
        if (!inside) continue;
        ++seen[static_cast<size_t>(c.tap() * cblocks + c.cb)];
        expect(f.blockOf(c.tap(), c.cb) == start, "blockOf() inverts at()", taps, cblocks, start);
        expect(c.chunk_taps == std::min(kFusedTableTaps, taps - c.chunk * kFusedTableTaps) && c.k_local < c.chunk_taps,
               "chunk_taps of at()", taps, cblocks, start);
        for (int kb = start + 1; kb < f.k_blocks; ++kb) {
            f.advance(c);
            FusedCursor const want = f.at(kb);
            expect(c.k_local == want.k_local && c.cb == want.cb && c.chunk == want.chunk &&
                       c.chunk_taps == want.chunk_taps,
                   "advance() from a block gives at() of the next", taps, start, kb);
        }
    }
    for (int i = 0; i < f.k_blocks; ++i) expect(seen[static_cast<size_t>(i)] == 1, "each (tap, cb) once", taps, cblocks, i);
}

// Whole tiles fill whole waves; a cut tail fills at most one wave, at most half a wave of tiles; pieces cover each
// tail tile's reduction blocks once, none shorter than kFusedMinPieceBlocks.
void checkSplit(int64_t tiles, int sms, int k_blocks) {
    FusedSplit const s = fusedSplit(tiles, sms, k_blocks);
    int64_t const tail = tiles - s.whole;
    expect(s.pieces >= 1 && s.pieces <= kFusedMaxPieces, "pieces in [1, kFusedMaxPieces]", tiles, sms, s.pieces);
    expect(s.blocks(tiles) == s.whole + tail * s.pieces, "blocks() counts whole tiles and pieces", tiles, sms, k_blocks);
    if (s.pieces == 1) {
        expect(tail == 0, "no cut: every tile whole", tiles, sms, k_blocks);
        expect(tiles % sms == 0 || 2 * (tiles % sms) > sms || sms / (tiles % sms) < 2 || k_blocks < 4,
               "a tail of at most half a wave is cut where it can be", tiles, sms, k_blocks);
        return;
    }
    expect(s.whole % sms == 0 && tail > 0 && 2 * tail <= sms && tail * s.pieces <= sms,
           "whole tiles fill whole waves, the pieces at most one", tiles, sms, k_blocks);
    int next = 0;
    for (int p = 0; p < s.pieces; ++p) {
        int const first = FusedSplit::first(p, s.pieces, k_blocks), end = FusedSplit::first(p + 1, s.pieces, k_blocks);
        expect(first == next && end - first >= kFusedMinPieceBlocks, "pieces follow each other, long enough", tiles,
               k_blocks, p);
        next = end;
    }
    expect(next == k_blocks, "the pieces end at the last reduction block", tiles, sms, k_blocks);
}

OpSizes sizesOf(int64_t n, int64_t c, int64_t oc, int64_t h, int64_t w) {
    return OpSizes{n, c, h, w, oc, 3, 3, h, w, 1, 1, 1, 1, 1, 1, 1, 1, 2, false};
}

void printCase(char const* name, OpSizes const& s, Device const& dev, int64_t room) {
    FusedSplit const split = fusedSplitFor(s, dev, room);
    int64_t const tiles = fusedTiles(s);
    std::printf("case %s tiles=%lld whole=%lld pieces=%d blocks=%lld\n", name, static_cast<long long>(tiles),
                static_cast<long long>(split.whole), split.pieces, static_cast<long long>(split.blocks(tiles)));
}

}  // namespace

int main() {
    for (int taps = 1; taps <= 50; ++taps) {
        for (int cblocks = 1; cblocks <= 6; ++cblocks) checkOrder(taps, cblocks);
    }
    for (int sms : {1, 2, 16, 78, 114, 132, 148}) {
        for (int64_t tiles = 1; tiles <= 1200; ++tiles) {
            for (int k_blocks : {1, 2, 3, 4, 5, 9, 18, 36, 49, 72, 196}) checkSplit(tiles, sms, k_blocks);
        }
    }
    Device const h200{0, 132, 9, 0};
    int64_t const plenty = int64_t{1} << 30;
    printCase("8x256x64x64", sizesOf(8, 256, 256, 64, 64), h200, plenty);
    printCase("8x256x80x80", sizesOf(8, 256, 256, 80, 80), h200, plenty);
    printCase("8x256x80x80_no_room", sizesOf(8, 256, 256, 80, 80), h200, 4 * 16 * 256 * 128 * 4 - 1);
    printCase("4x128x100x76", sizesOf(4, 128, 128, 100, 76), h200, plenty);
    printCase("1x64x40x40", sizesOf(1, 64, 64, 40, 40), h200, plenty);
    // the float32 split sampler's taps per block (groupTaps of its blocks of 256 items): 1x64x40x40 (runs of 8
    // channels), 8x256x64x64
    std::printf("split_sampler small group_taps=%d large group_taps=%d\n", groupTaps(1600 * 8 / kThreads, 9, 132),
                groupTaps(int64_t{8} * 4096 * 32 / kThreads, 9, 132));
    for (int64_t items = 1; items <= 4000000; items = items * 3 + 1) {
        for (int taps : {1, 2, 9, 25, 49}) {
            int64_t const base = (items + kThreads - 1) / kThreads;
            int const g = groupTaps(base, taps, 132);
            // at most as many tap groups as fill every multiprocessor's kSampleBlocks, and the fewest taps per group
            // that keeps to that: one tap less per group would make more groups than needed
            int64_t const needed = std::min<int64_t>(taps, (132 * kSampleBlocks + base - 1) / base);
            expect(g >= 1 && g <= taps && (taps + g - 1) / g <= needed && (g == 1 || (taps + g - 2) / (g - 1) > needed) &&
                       (taps == 1 || (base < 132 * kSampleBlocks) == (g < taps)),
                   "split sampler: the fewest taps per block that keep the tap groups to those that fill the GPU",
                   items, taps, g);
        }
    }
    std::printf("checked %lld orders and splits, %lld failed\n", static_cast<long long>(checked),
                static_cast<long long>(failed));
    return failed == 0 ? 0 : 1;
}
