// moonmath-emu MFMA arithmetic (CDNA3 gfx942 / CDNA4 gfx950).
//
// The executor decodes a VOP3P-MAI instruction, gathers its register operands into flat arrays
// (register r of the operand, lane l at index r*64 + l) and calls mfma_execute(). Layouts, the
// CBSZ/ABID/BLGP modifiers and the numeric model are described in mfma.cpp and docs/emulator.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mmemu {

// Element types of MFMA operands.
enum class MfmaType : uint8_t {
  F32, F64, I32, F16, BF16, I8,
  FP8, BF8,      // arch flavour: gfx942 e4m3fnuz/e5m2fnuz, gfx950 OCP e4m3fn/e5m2
  F8F6F4,        // gfx950 f8f6f4 forms: per-operand format selected by CBSZ (A) / BLGP (B)
};

struct MfmaInfo {
  const char* mnemonic;
  int a_regs, b_regs, cd_regs;  // register counts; for f8f6f4 a_regs/b_regs are the maximum (8, fp8)
  bool is_scaled;               // v_mfma_scale_* (E8M0 block scales from scale_a / scale_b)
  // --- the rest is for the implementation and the performance model ---
  int M, N, K, blocks;
  MfmaType a_type, b_type, cd_type;
  int passes;                   // issue passes of 4 cycles ("cycles" = 4 * passes, as the calculator lists)
  bool cbsz_abid;               // CBSZ/ABID broadcast applies (multi-block forms)
  bool blgp_lanes;              // BLGP lane patterns apply (multi-block and f32 forms)
  bool blgp_is_neg;             // f64 forms on CDNA3+: the BLGP field is NEG (bit0 A, bit1 B, bit2 C)
  bool gfx950;                  // entry's arch (fp8 flavours differ)
  int index;                    // private: index into the layout tables
};

// nullptr if the mnemonic is not implemented or does not exist on that arch.
const MfmaInfo* mfma_lookup(const char* mnemonic, bool gfx950);

// All implemented MFMA mnemonics for an arch (for supported_opcodes()).
std::vector<std::string> mfma_mnemonics(bool gfx950);

// Register counts actually read for A / B: for f8f6f4 forms they depend on the formats
// (CBSZ selects A's, BLGP selects B's: 0 fp8 e4m3, 1 bf8 e5m2 -> 8 regs, 2 fp6 e2m3, 3 bf6 e3m2 ->
// 6 regs, 4 fp4 e2m1 -> 4 regs). Other forms: info.a_regs / info.b_regs.
int mfma_a_regs(const MfmaInfo& info, int cbsz);
int mfma_b_regs(const MfmaInfo& info, int blgp);

struct MfmaOperands {
  const uint32_t* a;  // a_regs registers x 64 lanes, a[r*64 + lane]
  const uint32_t* b;  // b_regs x 64
  const uint32_t* c;  // cd_regs x 64 (may be a copy of d)
  uint32_t* d;        // cd_regs x 64
  int cbsz, abid, blgp;   // VOP3P MAI modifiers (for the scaled f8f6f4 forms cbsz/blgp select the A/B formats)
  int neg;                // neg bits (f64 variants)
  const uint32_t* scale_a; const uint32_t* scale_b;  // scaled forms: 64 lanes each, else nullptr
  int scale_a_opsel, scale_b_opsel;                   // byte (0..3) of the scale VGPR holding the E8M0 value
};

// Computes D for all 64 lanes (MFMA ignores EXEC). `c` may alias `d`.
void mfma_execute(const MfmaInfo& info, const MfmaOperands& ops);

// Layout queries (used by the tests and handy for debugging): where matrix element lives.
// Returns false if out of range. For A: (block, i, k) -> register, lane, bit offset in that
// register, bit width. For B: (block, k, j). For C/D: (block, i, j) -> register (the first of a
// pair for f64), lane.
bool mfma_locate_a(const MfmaInfo& info, int cbsz, int block, int i, int k, int* reg, int* lane, int* bit, int* width);
bool mfma_locate_b(const MfmaInfo& info, int blgp, int block, int k, int j, int* reg, int* lane, int* bit, int* width);
bool mfma_locate_d(const MfmaInfo& info, int block, int i, int j, int* reg, int* lane);

}  // namespace mmemu
