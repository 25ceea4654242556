// Standalone unit test of numerics.hpp and mfma.cpp (built with g++ by tests/test_numerics_cpp.py).
//
//   test_numerics selfcheck                 hand-derived edge cases; exit code 0 = pass
//   test_numerics decode                    prints "fmt code f32bits" for every code of every format
//   test_numerics encode FMT SAT < bits     reads f32 bit patterns (hex, one per line), prints codes
//   test_numerics bf16|f16 < bits           prints the RNE (and RTZ) 16-bit results
//   test_numerics mfma MN GFX950 CBSZ ABID BLGP NEG OPSA OPSB IN OUT
//                                           runs one MFMA on register images (uint32 little endian:
//                                           A (a regs x 64), B, C (cd regs x 64), scale_a (64),
//                                           scale_b (64)) and writes D (cd regs x 64)
//   test_numerics info MN GFX950            prints "a_regs b_regs cd_regs M N K blocks scaled" or "none"
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mfma.hpp"
#include "numerics.hpp"

using namespace mmemu;
using namespace mmemu::num;

static int g_fail = 0;
#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      std::fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond);       \
      ++g_fail;                                                                 \
    }                                                                           \
  } while (0)
#define CHECK_EQ_HEX(a, b)                                                                        \
  do {                                                                                            \
    unsigned long long _a = (unsigned long long)(a), _b = (unsigned long long)(b);                \
    if (_a != _b) {                                                                               \
      std::fprintf(stderr, "FAIL %s:%d: %s = 0x%llx, expected 0x%llx\n", __FILE__, __LINE__, #a, _a, _b); \
      ++g_fail;                                                                                   \
    }                                                                                             \
  } while (0)

static float F(uint32_t u) { return f32_from_bits(u); }

static void check_bf16() {
  CHECK_EQ_HEX(f32_to_bf16_rne(1.0f), 0x3f80);
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x3f808000)), 0x3f80);  // tie, even stays
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x3f818000)), 0x3f82);  // tie, odd rounds up
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x3f808001)), 0x3f81);  // above tie
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0xbf818000)), 0xbf82);  // sign symmetric
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x7f800001)), 0x7fc0);  // sNaN with low payload -> quiet NaN, not Inf
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0xff800001)), 0xffc0);
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x7fc00000)), 0x7fc0);
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x7f800000)), 0x7f80);  // +Inf
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x7f7fffff)), 0x7f80);  // max f32 rounds to Inf
  CHECK_EQ_HEX(f32_to_bf16_rtz(F(0x7f7fffff)), 0x7f7f);  // ... but truncates to max bf16
  CHECK_EQ_HEX(f32_to_bf16_rtz(F(0x3f80ffff)), 0x3f80);
  CHECK_EQ_HEX(f32_to_bf16_rtz(F(0x7f800001)), 0x7fc0);
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x00008000)), 0x0000);  // denormal tie to even (0)
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x00018000)), 0x0002);  // denormal tie to even (2)
  CHECK_EQ_HEX(f32_to_bf16_rne(F(0x80000000)), 0x8000);  // -0
  CHECK_EQ_HEX(f32_to_bf16_rna(F(0x3f808000)), 0x3f81);  // ties away
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(bf16_to_f32(0x0001) == std::ldexp(1.0f, -133));  // smallest bf16 denormal
  CHECK(std::isnan(bf16_to_f32(0x7fc1)));
}

static void check_f16() {
  CHECK_EQ_HEX(f32_to_f16_rne(1.0f), 0x3c00);
  CHECK_EQ_HEX(f32_to_f16_rne(65504.0f), 0x7bff);
  CHECK_EQ_HEX(f32_to_f16_rne(65519.0f), 0x7bff);
  CHECK_EQ_HEX(f32_to_f16_rne(65520.0f), 0x7c00);  // tie between 65504 (odd) and 65536 -> Inf
  CHECK_EQ_HEX(f32_to_f16_rtz(1e9f), 0x7bff);
  CHECK_EQ_HEX(f32_to_f16_rne(-1e9f), 0xfc00);
  CHECK_EQ_HEX(f32_to_f16_rne(std::ldexp(1.0f, -24)), 0x0001);        // smallest denormal
  CHECK_EQ_HEX(f32_to_f16_rne(std::ldexp(1.0f, -25)), 0x0000);        // tie -> even (0)
  CHECK_EQ_HEX(f32_to_f16_rne(std::ldexp(1.5f, -25)), 0x0001);
  CHECK_EQ_HEX(f32_to_f16_rne(std::ldexp(3.0f, -25)), 0x0002);        // 1.5 ulp tie -> even (2)
  CHECK_EQ_HEX(f32_to_f16_rne(std::ldexp(1.0f, -14)), 0x0400);        // smallest normal
  CHECK_EQ_HEX(f32_to_f16_rne(std::ldexp(1023.5f, -24)), 0x0400);     // denormal rounds up into normal
  CHECK_EQ_HEX(f32_to_f16_rne(F(0x7fc00000)), 0x7e00);
  CHECK_EQ_HEX(f32_to_f16_rne(F(0xff800000)), 0xfc00);
  CHECK_EQ_HEX(f32_to_f16_rne(F(0x80000000)), 0x8000);
  CHECK_EQ_HEX(f32_to_f16_rne(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, even
  CHECK_EQ_HEX(f32_to_f16_rne(1.0f + std::ldexp(3.0f, -11)), 0x3c02);  // tie, odd -> up
  CHECK(f16_to_f32(0x0001) == std::ldexp(1.0f, -24));
  CHECK(f16_to_f32(0x7bff) == 65504.0f);
  CHECK(std::isinf(f16_to_f32(0xfc00)) && f16_to_f32(0xfc00) < 0);
  CHECK(std::isnan(f16_to_f32(0x7e00)));
}

static void check_fp8() {
  // e4m3fnuz (gfx942 fp8): bias 8, 0x80 NaN, max 240
  CHECK(std::isnan(decode(Fmt::E4M3FNUZ, 0x80)));
  CHECK(decode(Fmt::E4M3FNUZ, 0x7f) == 240.0f);
  CHECK(decode(Fmt::E4M3FNUZ, 0xff) == -240.0f);
  CHECK(decode(Fmt::E4M3FNUZ, 0x01) == std::ldexp(1.0f, -10));
  CHECK(decode(Fmt::E4M3FNUZ, 0x08) == std::ldexp(1.0f, -7));
  CHECK(decode(Fmt::E4M3FNUZ, 0x40) == 1.0f);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, -0.0, false), 0x00);  // no -0
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, 240.0, false), 0x7f);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, 247.99, false), 0x7f);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, 248.0, false), 0x80);  // tie rounds to 256: overflow -> NaN
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, 248.0, true), 0x7f);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, -1e6, true), 0xff);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, INFINITY, false), 0x80);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, -INFINITY, true), 0xff);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, NAN, true), 0x80);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, std::ldexp(1.0, -11), false), 0x00);  // half min denormal: tie -> 0
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, -std::ldexp(1.0, -11), false), 0x00);  // -tiny -> +0, never 0x80
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, std::ldexp(1.5, -11), false), 0x01);
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, std::ldexp(3.0, -11), false), 0x02);  // 1.5 denormal ulp: tie -> even
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, 1.0625, false), 0x40);                // tie between 1 and 1.125 -> 1
  CHECK_EQ_HEX(encode(Fmt::E4M3FNUZ, 1.1875, false), 0x42);                // tie between 1.125, 1.25 -> 1.25
  // e5m2fnuz (gfx942 bf8): bias 16, max 57344
  CHECK(decode(Fmt::E5M2FNUZ, 0x7f) == 57344.0f);
  CHECK(decode(Fmt::E5M2FNUZ, 0x01) == std::ldexp(1.0f, -17));
  CHECK(std::isnan(decode(Fmt::E5M2FNUZ, 0x80)));
  CHECK(decode(Fmt::E5M2FNUZ, 0x40) == 1.0f);
  CHECK_EQ_HEX(encode(Fmt::E5M2FNUZ, 61440.0, false), 0x80);
  CHECK_EQ_HEX(encode(Fmt::E5M2FNUZ, 61440.0, true), 0x7f);
  CHECK_EQ_HEX(encode(Fmt::E5M2FNUZ, 61439.0, false), 0x7f);
  // e4m3fn (gfx950 fp8, OCP): bias 7, max 448, S.1111.111 NaN, -0 exists
  CHECK(decode(Fmt::E4M3FN, 0x7e) == 448.0f);
  CHECK(std::isnan(decode(Fmt::E4M3FN, 0x7f)) && std::isnan(decode(Fmt::E4M3FN, 0xff)));
  CHECK(decode(Fmt::E4M3FN, 0x78) == 256.0f);  // top binade is finite except the all-ones code
  CHECK(decode(Fmt::E4M3FN, 0x80) == 0.0f && std::signbit(decode(Fmt::E4M3FN, 0x80)));
  CHECK(decode(Fmt::E4M3FN, 0x01) == std::ldexp(1.0f, -9));
  CHECK(decode(Fmt::E4M3FN, 0x38) == 1.0f);
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, -0.0, false), 0x80);
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, 464.0, false), 0x7e);  // tie -> even (448)
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, 465.0, false), 0x7f);  // overflow -> NaN
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, -465.0, false), 0xff);
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, 465.0, true), 0x7e);
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, INFINITY, false), 0x7f);
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, -INFINITY, true), 0xfe);
  CHECK_EQ_HEX(encode(Fmt::E4M3FN, NAN, true), 0x7f);
  // e5m2 (gfx950 bf8, OCP): IEEE-like
  CHECK(decode(Fmt::E5M2, 0x7b) == 57344.0f);
  CHECK(std::isinf(decode(Fmt::E5M2, 0x7c)) && decode(Fmt::E5M2, 0xfc) < 0);
  CHECK(std::isnan(decode(Fmt::E5M2, 0x7d)) && std::isnan(decode(Fmt::E5M2, 0x7e)) && std::isnan(decode(Fmt::E5M2, 0x7f)));
  CHECK(decode(Fmt::E5M2, 0x01) == std::ldexp(1.0f, -16));
  CHECK(decode(Fmt::E5M2, 0x3c) == 1.0f);
  CHECK_EQ_HEX(encode(Fmt::E5M2, 61440.0, false), 0x7c);  // tie to 65536 -> overflow -> Inf
  CHECK_EQ_HEX(encode(Fmt::E5M2, 61440.0, true), 0x7b);
  CHECK_EQ_HEX(encode(Fmt::E5M2, -INFINITY, false), 0xfc);
  CHECK_EQ_HEX(encode(Fmt::E5M2, INFINITY, true), 0x7b);
  CHECK(std::isnan(decode(Fmt::E5M2, encode(Fmt::E5M2, NAN, false))));
  // fp6 / fp4 (no Inf/NaN: always saturate)
  CHECK(decode(Fmt::E2M3, 0x1f) == 7.5f && decode(Fmt::E2M3, 0x3f) == -7.5f);
  CHECK(decode(Fmt::E2M3, 0x01) == 0.125f && decode(Fmt::E2M3, 0x08) == 1.0f);
  CHECK(decode(Fmt::E3M2, 0x1f) == 28.0f && decode(Fmt::E3M2, 0x01) == 0.0625f && decode(Fmt::E3M2, 0x0c) == 1.0f);
  CHECK(decode(Fmt::E2M1, 0x7) == 6.0f && decode(Fmt::E2M1, 0x1) == 0.5f && decode(Fmt::E2M1, 0x2) == 1.0f);
  CHECK(decode(Fmt::E2M1, 0xf) == -6.0f);
  CHECK_EQ_HEX(encode(Fmt::E2M1, 5.0, false), 0x6);    // tie 4 / 6 -> 4 (even mantissa)
  CHECK_EQ_HEX(encode(Fmt::E2M1, 2.5, false), 0x4);    // tie 2 / 3 -> 2
  CHECK_EQ_HEX(encode(Fmt::E2M1, 0.25, false), 0x0);   // tie 0 / 0.5 -> 0
  CHECK_EQ_HEX(encode(Fmt::E2M1, 0.75, false), 0x2);   // tie 0.5 / 1 -> 1
  CHECK_EQ_HEX(encode(Fmt::E2M1, 100.0, false), 0x7);
  CHECK_EQ_HEX(encode(Fmt::E2M1, -INFINITY, false), 0xf);
  CHECK_EQ_HEX(encode(Fmt::E2M3, 7.75, false), 0x1f);
  CHECK_EQ_HEX(encode(Fmt::E3M2, -30.0, false), 0x3f);
  CHECK_EQ_HEX(encode(Fmt::E3M2, -0.0, false), 0x20);
  // E8M0
  CHECK(e8m0_to_f32(127) == 1.0f);
  CHECK(e8m0_to_f32(0) == std::ldexp(1.0f, -127));
  CHECK(e8m0_to_f32(254) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(e8m0_to_f32(255)));
  CHECK(e8m0_to_f64(1) == std::ldexp(1.0, -126));
  // v_cvt_scalef32_*: exponent field of the f32 scale operand; down-conversion divides, up multiplies
  const uint32_t s4 = bits_from_f32(4.0f), s_quarter = bits_from_f32(0.25f), s_odd = bits_from_f32(6.0f);
  CHECK(scalef32_exponent(s4) == 129);
  CHECK_EQ_HEX(scaled_encode(Fmt::E2M1, 24.0f, s4), 0x7);           // 24 / 4 = 6 -> max fp4
  CHECK_EQ_HEX(scaled_encode(Fmt::E2M1, -2.0f, s4), 0x9);           // -0.5
  CHECK_EQ_HEX(scaled_encode(Fmt::E4M3FN, 1.0f, s_quarter), 0x48);  // 1 / 0.25 = 4 = 1.0 * 2^2
  CHECK_EQ_HEX(scaled_encode(Fmt::E2M1, 9.0f, s_odd), 0x4);         // only the exponent of 6.0 counts (4): 9/4 = 2.25 -> 2
  CHECK(scaled_decode(Fmt::E2M1, 0x7, s4) == 24.0);
  CHECK(scaled_decode(Fmt::E4M3FN, 0x38, s_quarter) == 0.25);
  CHECK(std::isnan(scaled_decode(Fmt::E2M1, 0x1, bits_from_f32(INFINITY))));
  CHECK(scaled_decode(Fmt::E5M2, 0x3c, 0x00000000u) == std::ldexp(1.0, -127));  // exponent 0 -> 2^-127
}

static void check_mfma_tables() {
  // names as LLVM prints them; arch membership
  CHECK(mfma_lookup("v_mfma_f32_16x16x16_bf16", false) != nullptr);
  CHECK(mfma_lookup("v_mfma_f32_16x16x16_bf16", true) != nullptr);
  CHECK(mfma_lookup("v_mfma_f32_16x16x16bf16_1k", false) == nullptr);  // builtin name, never printed
  CHECK(mfma_lookup("v_mfma_f32_16x16x32_bf16", false) == nullptr);      // gfx950 only
  CHECK(mfma_lookup("v_mfma_f32_16x16x32_bf16", true) != nullptr);
  CHECK(mfma_lookup("v_mfma_scale_f32_16x16x128_f8f6f4", false) == nullptr);
  const MfmaInfo* s = mfma_lookup("v_mfma_scale_f32_32x32x64_f8f6f4", true);
  CHECK(s && s->is_scaled && s->a_regs == 8 && s->cd_regs == 16);
  CHECK(s && mfma_a_regs(*s, 4) == 4 && mfma_a_regs(*s, 2) == 6 && mfma_b_regs(*s, 0) == 8);
  const MfmaInfo* m = mfma_lookup("v_mfma_f32_16x16x16_bf16", false);
  CHECK(m && m->a_regs == 2 && m->b_regs == 2 && m->cd_regs == 4 && !m->is_scaled);
  // ARCHITECTURE.md section 5 facts for 16x16x16: A[i][k] lane 16*(k/4)+i element k%4;
  // B[k][j] lane 16*(k/4)+j; D[i][j] register i%4 of lane 16*(i/4)+j
  if (m) {
    for (int i = 0; i < 16; ++i)
      for (int k = 0; k < 16; ++k) {
        int reg, lane, bit, width;
        CHECK(mfma_locate_a(*m, 0, 0, i, k, &reg, &lane, &bit, &width));
        CHECK(lane == 16 * (k / 4) + i && reg * 32 + bit == 16 * (k % 4) && width == 16);
        CHECK(mfma_locate_b(*m, 0, 0, k, i, &reg, &lane, &bit, &width));
        CHECK(lane == 16 * (k / 4) + i && reg * 32 + bit == 16 * (k % 4));
      }
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        int reg, lane;
        CHECK(mfma_locate_d(*m, 0, i, j, &reg, &lane));
        CHECK(reg == i % 4 && lane == 16 * (i / 4) + j);
      }
  }
  // gfx950 16x16x32 bf16: k = 8*(lane/16) + 0..7
  const MfmaInfo* m2 = mfma_lookup("v_mfma_f32_16x16x32_bf16", true);
  if (m2) {
    for (int k = 0; k < 32; ++k) {
      int reg, lane, bit, width;
      CHECK(mfma_locate_a(*m2, 0, 0, 3, k, &reg, &lane, &bit, &width));
      CHECK(lane == 16 * (k / 8) + 3 && reg * 32 + bit == 16 * (k % 8));
    }
  }
  // One numeric MFMA with c aliasing d: D = A*B + C for 16x16x16 bf16 with A = I, B[k][j] = k + j.
  if (m) {
    std::vector<uint32_t> a(2 * 64, 0), b(2 * 64, 0), d(4 * 64, 0);
    for (int i = 0; i < 16; ++i)
      for (int k = 0; k < 16; ++k) {
        int reg, lane, bit, width;
        mfma_locate_a(*m, 0, 0, i, k, &reg, &lane, &bit, &width);
        a[reg * 64 + lane] |= (uint32_t)f32_to_bf16_rne(i == k ? 1.0f : 0.0f) << bit;
        mfma_locate_b(*m, 0, 0, k, i, &reg, &lane, &bit, &width);
        b[reg * 64 + lane] |= (uint32_t)f32_to_bf16_rne((float)(k + i)) << bit;
      }
    for (int r = 0; r < 4; ++r)
      for (int l = 0; l < 64; ++l) d[r * 64 + l] = bits_from_f32(0.5f);
    MfmaOperands ops{a.data(), b.data(), d.data(), d.data(), 0, 0, 0, 0, nullptr, nullptr, 0, 0};
    mfma_execute(*m, ops);
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 16; ++j) {
        int reg, lane;
        mfma_locate_d(*m, 0, i, j, &reg, &lane);
        CHECK(f32_from_bits(d[reg * 64 + lane]) == (float)(i + j) + 0.5f);
      }
  }
}

static std::vector<uint32_t> read_u32(const char* path, size_t n) {
  std::vector<uint32_t> v(n, 0);
  FILE* f = std::fopen(path, "rb");
  if (!f) { std::perror(path); std::exit(2); }
  size_t got = std::fread(v.data(), 4, n, f);
  std::fclose(f);
  if (got != n) { std::fprintf(stderr, "short input %zu/%zu\n", got, n); std::exit(2); }
  return v;
}

static Fmt fmt_by_name(const std::string& s) {
  if (s == "e4m3fnuz") return Fmt::E4M3FNUZ;
  if (s == "e5m2fnuz") return Fmt::E5M2FNUZ;
  if (s == "e4m3fn") return Fmt::E4M3FN;
  if (s == "e5m2") return Fmt::E5M2;
  if (s == "e2m3") return Fmt::E2M3;
  if (s == "e3m2") return Fmt::E3M2;
  if (s == "e2m1") return Fmt::E2M1;
  std::fprintf(stderr, "unknown format %s\n", s.c_str());
  std::exit(2);
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "selfcheck";
  if (mode == "selfcheck") {
    check_bf16();
    check_f16();
    check_fp8();
    check_mfma_tables();
    if (g_fail) { std::fprintf(stderr, "%d check(s) failed\n", g_fail); return 1; }
    std::printf("ok\n");
    return 0;
  }
  if (mode == "decode") {
    const char* names[] = {"e4m3fnuz", "e5m2fnuz", "e4m3fn", "e5m2", "e2m3", "e3m2", "e2m1"};
    for (const char* n : names) {
      Fmt f = fmt_by_name(n);
      int count = 1 << fmt_desc(f).bits;
      for (int c = 0; c < count; ++c) std::printf("%s %d %08x\n", n, c, bits_from_f32(decode(f, c)));
    }
    for (int e = 0; e < 256; ++e) std::printf("e8m0 %d %08x\n", e, bits_from_f32(e8m0_to_f32((uint8_t)e)));
    return 0;
  }
  if (mode == "encode" && argc >= 4) {
    Fmt f = fmt_by_name(argv[2]);
    bool sat = std::atoi(argv[3]) != 0;
    unsigned u;
    while (std::scanf("%x", &u) == 1) std::printf("%u\n", encode(f, (double)f32_from_bits(u), sat));
    return 0;
  }
  if (mode == "bf16" || mode == "f16") {
    unsigned u;
    while (std::scanf("%x", &u) == 1) {
      float x = f32_from_bits(u);
      if (mode == "bf16") std::printf("%u %u %u\n", f32_to_bf16_rne(x), f32_to_bf16_rtz(x), f32_to_bf16_rna(x));
      else std::printf("%u %u\n", f32_to_f16_rne(x), f32_to_f16_rtz(x));
    }
    return 0;
  }
  if (mode == "info" && argc >= 4) {
    const MfmaInfo* m = mfma_lookup(argv[2], std::atoi(argv[3]) != 0);
    if (!m) { std::printf("none\n"); return 0; }
    std::printf("%d %d %d %d %d %d %d %d\n", m->a_regs, m->b_regs, m->cd_regs, m->M, m->N, m->K, m->blocks, m->is_scaled ? 1 : 0);
    return 0;
  }
  if (mode == "mfma" && argc >= 12) {
    const MfmaInfo* m = mfma_lookup(argv[2], std::atoi(argv[3]) != 0);
    if (!m) { std::fprintf(stderr, "unknown mfma %s\n", argv[2]); return 2; }
    int cbsz = std::atoi(argv[4]), abid = std::atoi(argv[5]), blgp = std::atoi(argv[6]), neg = std::atoi(argv[7]);
    int opsa = std::atoi(argv[8]), opsb = std::atoi(argv[9]);
    const int ar = mfma_a_regs(*m, cbsz), br = mfma_b_regs(*m, blgp), cr = m->cd_regs;
    std::vector<uint32_t> in = read_u32(argv[10], (size_t)(ar + br + cr + 2) * 64);
    std::vector<uint32_t> d(cr * 64, 0xdeadbeef);
    MfmaOperands ops{in.data(), in.data() + ar * 64, in.data() + (ar + br) * 64, d.data(), cbsz, abid, blgp, neg,
                     in.data() + (ar + br + cr) * 64, in.data() + (ar + br + cr + 1) * 64, opsa, opsb};
    mfma_execute(*m, ops);
    FILE* f = std::fopen(argv[11], "wb");
    if (!f) { std::perror(argv[11]); return 2; }
    std::fwrite(d.data(), 4, d.size(), f);
    std::fclose(f);
    return 0;
  }
  std::fprintf(stderr, "bad arguments\n");
  return 2;
}
