// Decoder and disassembler for the CDNA3 (gfx942) / CDNA4 (gfx950) encodings.
// Field positions: AMD CDNA3/CDNA4 ISA manuals, cross-checked with LLVM's MC encoder
// (clang -cc1as -show-encoding) and the tinygrad autogen tables (isa_tables.inc).
#include <cmath>
#include <mutex>
#include <sstream>

#include "emu.hpp"

namespace mmemu {

static const char* kEncNames[] = {"SOP2", "SOPK", "SOP1", "SOPC", "SOPP", "SMEM", "VOP2", "VOP1", "VOPC",
                                  "VOP3", "VOP3P", "DS", "FLAT", "GLOBAL", "SCRATCH", "MUBUF", "MTBUF", "VOP3PX2"};
const char* enc_name(int e) { return (e >= 0 && e < ENC_COUNT) ? kEncNames[e] : "?"; }

struct RawRow { int enc, op; const char* name; int sd; const char* fields; int avail; };
static const RawRow kRaw[] = {
#define ISA_ROW(e, o, n, sd, f, av) {e, o, n, sd, f, av},
#include "isa_tables.inc"
#undef ISA_ROW
};

static std::vector<IsaRow>* g_rows;
static std::vector<const IsaRow*>* g_index;  // enc*1024+op
static std::once_flag g_once;

static void build_tables() {
  g_rows = new std::vector<IsaRow>();
  g_index = new std::vector<const IsaRow*>(ENC_COUNT * 1024, nullptr);
  for (auto& r : kRaw) {
    IsaRow row; row.enc = r.enc; row.op = r.op; row.name = r.name; row.vop3sd = r.sd; row.avail = r.avail;
    std::string f = r.fields;
    size_t p = 0;
    while (p < f.size()) {
      size_t q = f.find(',', p); if (q == std::string::npos) q = f.size();
      std::string item = f.substr(p, q - p);
      size_t a = item.find(':'), b = item.find(':', a + 1);
      if (a != std::string::npos && b != std::string::npos) {
        FieldInfo fi; fi.bits = std::stoi(item.substr(a + 1, b - a - 1)); fi.fmt = item.substr(b + 1);
        row.fields[item.substr(0, a)] = fi;
      }
      p = q + 1;
    }
    g_rows->push_back(row);
  }
  for (auto& r : *g_rows) (*g_index)[r.enc * 1024 + r.op] = &r;
}
const std::vector<IsaRow>& isa_rows() { std::call_once(g_once, build_tables); return *g_rows; }
const IsaRow* isa_lookup(int enc, int op) {
  std::call_once(g_once, build_tables);
  if (enc < 0 || enc >= ENC_COUNT || op < 0 || op >= 1024) return nullptr;
  return (*g_index)[enc * 1024 + op];
}

static inline uint32_t bits(uint64_t v, int hi, int lo) { return (uint32_t)((v >> lo) & ((1ull << (hi - lo + 1)) - 1)); }

// ---------------------------------------------------------------- constants
static uint64_t f2b(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
static uint64_t d2b(double d) { uint64_t u; std::memcpy(&u, &d, 8); return u; }

enum CType { CT_B32, CT_F32, CT_F64, CT_I64, CT_U64, CT_F16, CT_BF16, CT_PK16F, CT_PKF32 };

static CType ctype_of(const std::string& fmt, int nbits) {
  if (fmt == "F64") return CT_F64;
  if (fmt == "F16") return CT_F16;
  if (fmt == "BF16") return CT_BF16;
  if (fmt == "PK2_F16") return CT_PK16F;
  if (fmt == "PK2_BF16") return CT_PK16F;
  if (fmt == "PK2_F32") return CT_PKF32;
  if (fmt == "F32") return CT_F32;
  if (nbits == 64) return fmt == "I64" ? CT_I64 : CT_U64;
  return CT_B32;
}

// value of inline constant code c (128..248) for operand type t; returns false if not an inline constant
static bool inline_const(int c, CType t, uint64_t& v) {
  if (c >= 128 && c <= 192) { int64_t x = c - 128; v = (t == CT_F64 || t == CT_I64 || t == CT_U64 || t == CT_PKF32) ? (uint64_t)x : (uint32_t)x; if (t == CT_PKF32) v = (uint64_t)(uint32_t)x | ((uint64_t)(uint32_t)x << 32); return true; }
  if (c >= 193 && c <= 208) { int64_t x = -(c - 192); v = (t == CT_F64 || t == CT_I64 || t == CT_U64) ? (uint64_t)x : (uint64_t)(uint32_t)(int32_t)x; if (t == CT_PKF32) v = (uint64_t)(uint32_t)x | ((uint64_t)(uint32_t)x << 32); return true; }
  if (c >= 240 && c <= 248) {
    static const double vals[] = {0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0};
    static const uint16_t h16[] = {0x3800, 0xb800, 0x3c00, 0xbc00, 0x4000, 0xc000, 0x4400, 0xc400, 0x3118};
    static const uint16_t bf16[] = {0x3f00, 0xbf00, 0x3f80, 0xbf80, 0x4000, 0xc000, 0x4080, 0xc080, 0x3e23};
    int i = c - 240;
    switch (t) {
      case CT_F64: case CT_I64: case CT_U64: v = (i == 8) ? 0x3fc45f306dc9c882ull : d2b(vals[i]); break;
      case CT_F16: v = h16[i]; break;
      case CT_BF16: v = bf16[i]; break;
      case CT_PK16F: v = h16[i]; break;  // GFX9 packed-16: constant in the low half, high half 0
      case CT_PKF32: { uint64_t x = (i == 8) ? 0x3e22f983u : f2b((float)vals[i]); v = x | (x << 32); break; }
      default: v = (i == 8) ? 0x3e22f983u : f2b((float)vals[i]); break;
    }
    return true;
  }
  return false;
}

// ---------------------------------------------------------------- decode
static bool is_mai_op(int op) {
  const IsaRow* r = isa_lookup(ENC_VOP3P, op);
  if (!r) return false;
  return r->name.rfind("v_mfma", 0) == 0 || r->name.rfind("v_smfmac", 0) == 0 || r->name.rfind("v_accvgpr", 0) == 0;
}

static void set_src(Inst& in, int i, uint16_t code, int nb, const std::string& fmt) {
  in.src[i] = code; in.nbits[i] = (uint16_t)nb;
  if (code < 256) {
    CType t = ctype_of(fmt, nb);
    uint64_t v;
    if (code == 255) {
      uint64_t l = in.lit;
      if (t == CT_F64) v = l << 32;
      else if (t == CT_I64) v = (uint64_t)(int64_t)(int32_t)l;
      else if (t == CT_PKF32) v = l | (l << 32);
      else v = l;
      in.cval[i] = v; in.is_const[i] = 1;
    } else if (inline_const(code, t, v)) { in.cval[i] = v; in.is_const[i] = 1; }
  }
}

static bool needs_literal32(uint32_t code) { return code == 255; }

bool decode_inst(const uint8_t* p, size_t n, bool gfx950, Inst& in, std::string& err) {
  (void)gfx950;
  if (n < 4) { err = "truncated instruction"; return false; }
  uint32_t w0; std::memcpy(&w0, p, 4);
  in.w0 = w0; in.size = 4;
  auto need = [&](int sz) -> bool { if ((size_t)sz > n) { err = "truncated instruction"; return false; } return true; };
  auto word = [&](int i) { uint32_t w; std::memcpy(&w, p + 4 * i, 4); return w; };
  uint32_t top9 = w0 >> 23, top6 = w0 >> 26;
  int enc = -1, op = 0;
  if (top9 == 0x17D) enc = ENC_SOP1;
  else if (top9 == 0x17E) enc = ENC_SOPC;
  else if (top9 == 0x17F) enc = ENC_SOPP;
  else if ((w0 >> 28) == 0xB) enc = ENC_SOPK;
  else if ((w0 >> 30) == 0x2) enc = ENC_SOP2;
  else if ((w0 >> 25) == 0x3F) enc = ENC_VOP1;
  else if ((w0 >> 25) == 0x3E) enc = ENC_VOPC;
  else if ((w0 >> 31) == 0) enc = ENC_VOP2;
  else if (top6 == 0x30) enc = ENC_SMEM;
  else if (top6 == 0x34) enc = (top9 == 0x1A7) ? ENC_VOP3P : ENC_VOP3;
  else if (top6 == 0x36) enc = ENC_DS;
  else if (top6 == 0x37) { int seg = bits(w0, 15, 14); enc = seg == 0 ? ENC_FLAT : seg == 1 ? ENC_SCRATCH : ENC_GLOBAL; }
  else if (top6 == 0x38) enc = ENC_MUBUF;
  else if (top6 == 0x3A) enc = ENC_MTBUF;
  if (enc < 0) { char b[64]; snprintf(b, sizeof b, "unknown encoding (dword 0x%08x)", w0); err = b; return false; }
  in.src_enc = (uint8_t)enc;
  switch (enc) {
    case ENC_SOP1: op = bits(w0, 15, 8); break;
    case ENC_SOPC: op = bits(w0, 22, 16); break;
    case ENC_SOPP: op = bits(w0, 22, 16); break;
    case ENC_SOPK: op = bits(w0, 27, 23); break;
    case ENC_SOP2: op = bits(w0, 29, 23); break;
    case ENC_VOP1: op = bits(w0, 16, 9); break;
    case ENC_VOPC: op = bits(w0, 24, 17); break;
    case ENC_VOP2: op = bits(w0, 30, 25); break;
    case ENC_SMEM: op = bits(w0, 25, 18); break;
    case ENC_VOP3: op = bits(w0, 25, 16); break;
    case ENC_VOP3P: op = bits(w0, 22, 16); break;
    case ENC_DS: op = bits(w0, 24, 17); break;
    case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: op = bits(w0, 24, 18); break;
    case ENC_MUBUF: op = bits(w0, 24, 18); break;
    case ENC_MTBUF: op = bits(w0, 18, 15); break;
  }
  // the gfx950 scaled MFMA: v_mfma_ld_scale_b32 prefix + MFMA
  if (enc == ENC_VOP3P && op == 44) {
    if (!need(16)) return false;
    uint32_t w2 = word(2);
    if ((w2 >> 23) == 0x1A7) {
      int op2 = bits(w2, 22, 16);
      if (isa_lookup(ENC_VOP3PX2, op2)) { enc = ENC_VOP3PX2; op = op2; in.src_enc = ENC_VOP3PX2; }
    }
  }
  const IsaRow* row = isa_lookup(enc, op);
  if (!row) {
    char b[96]; snprintf(b, sizeof b, "unknown %s opcode %d (dword 0x%08x)", enc_name(enc), op, w0); err = b;
    return false;
  }
  in.row = row; in.enc = (uint8_t)enc; in.op = (uint16_t)op;
  auto fb = [&](const char* f, int d) { return row->bits(f, d); };
  auto ff = [&](const char* f) { return row->fmt(f); };

  switch (enc) {
    case ENC_SOP1: case ENC_SOP2: case ENC_SOPC: {
      uint32_t s0 = bits(w0, 7, 0), s1 = bits(w0, 15, 8);
      // s_set_gpr_idx_on: the SSRC1 field holds the raw 4-bit index-mode mask, not an operand
      const bool gpr_idx_on = enc == ENC_SOPC && op == 17;
      if (gpr_idx_on) { in.simm = (int32_t)(s1 & 0xf); s1 = OPC_NONE; }
      bool lit = needs_literal32(s0) || (enc != ENC_SOP1 && !gpr_idx_on && needs_literal32(s1));
      if (lit) { if (!need(8)) return false; in.lit = word(1); in.has_lit = true; in.size = 8; }
      if (enc != ENC_SOPC) { in.sdst = bits(w0, 22, 16); in.dst_bits = fb("sdst", 32); }
      set_src(in, 0, s0, fb("ssrc0", 32), ff("ssrc0"));
      if (enc != ENC_SOP1 && !gpr_idx_on) set_src(in, 1, s1, fb("ssrc1", 32), ff("ssrc1"));
      break;
    }
    case ENC_SOPK:
      in.sdst = bits(w0, 22, 16); in.simm = (int16_t)bits(w0, 15, 0); in.dst_bits = fb("sdst", 32);
      if (op == 20) { if (!need(8)) return false; in.lit = word(1); in.has_lit = true; in.size = 8; }  // s_setreg_imm32_b32
      break;
    case ENC_SOPP: in.simm = (int16_t)bits(w0, 15, 0); break;
    case ENC_SMEM: {
      if (!need(8)) return false;
      uint32_t w1 = word(1); in.w1 = w1; in.size = 8;
      in.sbase = bits(w0, 5, 0) * 2; in.sdst = bits(w0, 12, 6); in.dst_bits = fb("sdata", 32);
      in.soffset_en = bits(w0, 14, 14); in.glc = bits(w0, 16, 16); in.imm = bits(w0, 17, 17);
      uint32_t off = bits(w1, 20, 0);
      in.simm = (int32_t)(off << 11) >> 11;
      in.soffset = bits(w1, 31, 25);
      break;
    }
    case ENC_VOP1: case ENC_VOP2: case ENC_VOPC: {
      uint32_t s0 = bits(w0, 8, 0);
      const char* f0 = "src0";
      bool sdwa_src1_scalar = false;
      if (s0 == 250 || s0 == 249) {
        if (!need(8)) return false;
        uint32_t w1 = word(1); in.w1 = w1; in.size = 8;
        if (s0 == 250) {
          in.ext = 1; in.dpp_ctrl = bits(w1, 16, 8); in.bound_ctrl = bits(w1, 19, 19);
          in.neg = bits(w1, 20, 20) | (bits(w1, 22, 22) << 1); in.abs = bits(w1, 21, 21) | (bits(w1, 23, 23) << 1);
          in.bank_mask = bits(w1, 27, 24); in.row_mask = bits(w1, 31, 28);
          s0 = OPC_VGPR + bits(w1, 7, 0);
        } else {
          in.ext = 2;
          in.dst_sel = bits(w1, 10, 8); in.dst_unused = bits(w1, 12, 11); in.clamp = bits(w1, 13, 13); in.omod = bits(w1, 15, 14);
          in.src_sel[0] = bits(w1, 18, 16); in.src_sext[0] = bits(w1, 19, 19);
          in.neg = bits(w1, 20, 20) | (bits(w1, 28, 28) << 1); in.abs = bits(w1, 21, 21) | (bits(w1, 29, 29) << 1);
          in.src_sel[1] = bits(w1, 26, 24); in.src_sext[1] = bits(w1, 27, 27);
          s0 = bits(w1, 23, 23) ? bits(w1, 7, 0) : OPC_VGPR + bits(w1, 7, 0);
          if (enc == ENC_VOPC) {
            in.sdwa_sdst = bits(w1, 15, 15);
            in.clamp = 0; in.omod = 0;
            in.sdst = in.sdwa_sdst ? bits(w1, 14, 8) : 106;
          }
          // S1 (SDWA bit 63): VSRC1 names a scalar operand (SGPR or constant), not a VGPR.
          sdwa_src1_scalar = bits(w1, 31, 31);
        }
      } else {
        bool lit = s0 == 255 || (enc == ENC_VOP2 && (op == 23 || op == 24 || op == 36 || op == 37));
        if (lit) { if (!need(8)) return false; in.lit = word(1); in.has_lit = true; in.size = 8; }
      }
      set_src(in, 0, (uint16_t)s0, fb(f0, 32), ff(f0));
      if (enc != ENC_VOP1)
        set_src(in, 1, (uint16_t)((sdwa_src1_scalar ? 0 : OPC_VGPR) + bits(w0, 16, 9)), fb("vsrc1", 32), ff("vsrc1"));
      if (enc != ENC_VOPC) { in.dst = OPC_VGPR + bits(w0, 24, 17); in.dst_bits = fb("vdst", 32); }
      if (enc == ENC_VOP1 && op == 2) { in.dst = bits(w0, 24, 17); in.key = ENC_VOP3 * 1024 + 322; return true; }  // readfirstlane: SGPR dst
      if (enc == ENC_VOP1 && op == 82) {  // v_accvgpr_mov_b32: AGPR <- AGPR
        in.dst = OPC_AGPR + bits(w0, 24, 17);
        if (in.src[0] >= OPC_VGPR && in.src[0] < OPC_AGPR) in.src[0] = (uint16_t)(in.src[0] - OPC_VGPR + OPC_AGPR);
        int op3 = op + 320; in.key = ENC_VOP3 * 1024 + op3; return true;
      }
      // map into the VOP3 opcode space
      int op3 = enc == ENC_VOPC ? op : enc == ENC_VOP2 ? op + 256 : op + 320;
      in.key = ENC_VOP3 * 1024 + op3;
      if (enc == ENC_VOPC && in.ext != 2) in.sdst = 106;  // VCC
      if (enc == ENC_VOP2) {
        if (op == 0) set_src(in, 2, 106, 64, "");          // v_cndmask_b32_e32: VCC
        if (op == 28 || op == 29 || op == 30) { set_src(in, 2, 106, 64, ""); in.sdst = 106; }  // addc/subb
        if (op == 25 || op == 26 || op == 27) in.sdst = 106;  // add_co/sub_co carry out
        if (op == 59 || op == 35 || op == 4 || op == 60 || (op >= 22 && op <= 22) || (op >= 55 && op <= 58))
          set_src(in, 2, in.dst, fb("vdst", 32), ff("vdst"));  // fmac/mac/dot2c: accumulate into vdst
      }
      return true;
    }
    case ENC_VOP3: {
      if (!need(8)) return false;
      uint32_t w1 = word(1); in.w1 = w1; in.size = 8;
      uint64_t q = (uint64_t)w1 << 32 | w0;
      in.dst = bits(q, 7, 0);
      in.abs = bits(q, 10, 8); in.opsel = bits(q, 14, 11); in.clamp = bits(q, 15, 15);
      in.omod = bits(q, 60, 59); in.neg = bits(q, 63, 61);
      bool sgpr_dst = (op < 256) || op == 322 /*readfirstlane*/ || op == 649 /*readlane*/;
      if (row->vop3sd) { in.sdst = bits(q, 14, 8); in.abs = 0; in.opsel = 0; in.clamp = bits(q, 15, 15); }
      if (op < 256) { in.sdst = in.dst; in.dst = OPC_NONE; }  // VOPC e64: SGPR destination
      else if (!sgpr_dst) in.dst += OPC_VGPR;
      in.dst_bits = fb("vdst", op < 256 ? 64 : 32);
      const char* names[3] = {"src0", "src1", "src2"};
      for (int i = 0; i < 3; i++) {
        if (!row->fields.count(names[i])) {
          // some ops have implicit operands (v_cndmask src2, v_fmac src2) — handled below
          continue;
        }
        set_src(in, i, bits(q, 40 + 9 * i, 32 + 9 * i), fb(names[i], 32), ff(names[i]));
      }
      if (op == 256) set_src(in, 2, bits(q, 58, 50), 64, "");  // v_cndmask_b32_e64 mask SGPR pair
      if (op == 284 || op == 285 || op == 286) set_src(in, 2, bits(q, 58, 50), 64, "");  // addc/subb carry-in
      if (op == 256 + 59 || op == 256 + 35 || op == 256 + 4 || op == 256 + 60 || op == 256 + 22 || (op >= 256 + 55 && op <= 256 + 58))
        set_src(in, 2, in.dst, fb("vdst", 32), ff("vdst"));
      in.key = ENC_VOP3 * 1024 + op;
      return true;
    }
    case ENC_VOP3P: case ENC_VOP3PX2: {
      if (!need(8)) return false;
      int base = 0;
      if (enc == ENC_VOP3PX2) {
        uint32_t a0 = word(0), a1 = word(1);
        uint64_t qa = (uint64_t)a1 << 32 | a0;
        in.scale_src[0] = bits(qa, 40, 32); in.scale_src[1] = bits(qa, 49, 41);
        in.scale_opsel[0] = (uint8_t)(bits(qa, 11, 11) | (bits(qa, 59, 59) << 1));
        in.scale_opsel[1] = (uint8_t)(bits(qa, 12, 12) | (bits(qa, 60, 60) << 1));
        base = 2; in.size = 16; in.w2 = word(2); in.w3 = word(3);
      } else in.size = 8;
      uint32_t x0 = word(base), x1 = word(base + 1);
      in.w1 = word(1);
      uint64_t q = (uint64_t)x1 << 32 | x0;
      bool mai = enc == ENC_VOP3PX2 || is_mai_op(op);
      if (mai) {
        in.cbsz = bits(q, 10, 8); in.abid = bits(q, 14, 11); in.acc_cd = bits(q, 15, 15); in.blgp = bits(q, 63, 61);
        int a0 = bits(q, 59, 59), a1 = bits(q, 60, 60);
        uint32_t s0 = bits(q, 40, 32), s1 = bits(q, 49, 41), s2 = bits(q, 58, 50);
        uint16_t vd = bits(q, 7, 0);
        if (op == 88) {  // v_accvgpr_read_b32 vdst(V) <- src0(A)
          in.dst = OPC_VGPR + vd; set_src(in, 0, (uint16_t)(s0 >= 256 ? OPC_AGPR + (s0 - 256) : s0), 32, "B32");
        } else if (op == 89) {  // v_accvgpr_write_b32 vdst(A) <- src0
          in.dst = OPC_AGPR + vd; set_src(in, 0, (uint16_t)s0, 32, "B32");
        } else {
          in.dst = (in.acc_cd ? OPC_AGPR : OPC_VGPR) + vd; in.dst_bits = (uint16_t)fb("vdst", 32);
          auto av = [&](uint32_t s, int acc) -> uint16_t { return s >= 256 ? (uint16_t)((acc ? OPC_AGPR : OPC_VGPR) + (s - 256)) : (uint16_t)s; };
          set_src(in, 0, av(s0, a0), fb("src0", 32), ff("src0"));
          set_src(in, 1, av(s1, a1), fb("src1", 32), ff("src1"));
          set_src(in, 2, av(s2, in.acc_cd), fb("src2", 32), ff("src2"));
          in.neg = bits(q, 63, 61);
          if (row->name.find("f8f6f4") != std::string::npos) {
            auto nregs = [](int f) { return f <= 1 ? 8 : f <= 3 ? 6 : 4; };
            in.nbits[0] = (uint16_t)(32 * nregs(in.cbsz));
            in.nbits[1] = (uint16_t)(32 * nregs(in.blgp));
          }
        }
      } else {
        in.dst = OPC_VGPR + bits(q, 7, 0); in.dst_bits = fb("vdst", 32);
        in.neg_hi = bits(q, 10, 8); in.opsel = bits(q, 13, 11); in.clamp = bits(q, 15, 15);
        in.opsel_hi = bits(q, 60, 59) | (bits(q, 14, 14) << 2); in.neg = bits(q, 63, 61);
        const char* names[3] = {"src0", "src1", "src2"};
        for (int i = 0; i < 3; i++)
          if (row->fields.count(names[i])) set_src(in, i, bits(q, 40 + 9 * i, 32 + 9 * i), fb(names[i], 32), ff(names[i]));
      }
      in.key = ENC_VOP3P * 1024 + op + (enc == ENC_VOP3PX2 ? 128 : 0);
      return true;
    }
    case ENC_DS: {
      if (!need(8)) return false;
      uint32_t w1 = word(1); in.w1 = w1; in.size = 8;
      in.offset = bits(w0, 7, 0); in.offset1 = bits(w0, 15, 8); in.gds = bits(w0, 16, 16); in.acc = bits(w0, 25, 25);
      uint16_t rb = in.acc ? OPC_AGPR : OPC_VGPR;
      in.src[0] = OPC_VGPR + bits(w1, 7, 0);          // addr
      in.src[1] = rb + bits(w1, 15, 8);               // data0
      in.src[2] = rb + bits(w1, 23, 16);              // data1
      in.dst = rb + bits(w1, 31, 24);
      in.nbits[1] = fb("data0", 32); in.nbits[2] = fb("data1", 32); in.dst_bits = fb("vdst", 32);
      if (!row->fields.count("addr")) in.src[0] = OPC_NONE;
      if (!row->fields.count("data0")) in.src[1] = OPC_NONE;
      if (!row->fields.count("data1")) in.src[2] = OPC_NONE;
      if (!row->fields.count("vdst")) in.dst = OPC_NONE;
      break;
    }
    case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: {
      if (!need(8)) return false;
      uint32_t w1 = word(1); in.w1 = w1; in.size = 8;
      uint32_t off = bits(w0, 12, 0);
      in.offset = enc == ENC_FLAT ? bits(w0, 11, 0) : (uint32_t)((int32_t)(off << 19) >> 19);
      in.lds = bits(w0, 13, 13);  // sve for scratch
      in.seg = bits(w0, 15, 14); in.glc = bits(w0, 16, 16); in.nt = bits(w0, 17, 17); in.sc1 = bits(w0, 25, 25);
      in.acc = bits(w1, 23, 23);
      uint16_t rb = in.acc ? OPC_AGPR : OPC_VGPR;
      in.src[0] = OPC_VGPR + bits(w1, 7, 0); in.nbits[0] = fb("addr", 64);
      in.src[1] = rb + bits(w1, 15, 8); in.nbits[1] = fb("data", 32);
      in.saddr = enc == ENC_FLAT ? 0x7f : bits(w1, 22, 16);  // FLAT has no SADDR
      in.dst = rb + bits(w1, 31, 24); in.dst_bits = fb("vdst", 32);
      if (!row->fields.count("data")) in.src[1] = OPC_NONE;
      if (!row->fields.count("vdst")) in.dst = OPC_NONE;
      if (row->name.find("_atomic_") != std::string::npos && !in.glc) in.dst = OPC_NONE;  // no return without sc0
      if (in.saddr != 0x7f && enc != ENC_FLAT) in.nbits[0] = 32;
      if (enc == ENC_SCRATCH && in.saddr == 0x7f && !in.lds) in.src[0] = OPC_NONE;
      break;
    }
    case ENC_MUBUF: case ENC_MTBUF: {
      if (!need(8)) return false;
      uint32_t w1 = word(1); in.w1 = w1; in.size = 8;
      in.offset = bits(w0, 11, 0); in.offen = bits(w0, 12, 12); in.idxen = bits(w0, 13, 13);
      if (enc == ENC_MUBUF) { in.glc = bits(w0, 14, 14); in.sc1 = bits(w0, 15, 15); in.lds = bits(w0, 16, 16); in.nt = bits(w0, 17, 17); }
      else { in.glc = bits(w0, 14, 14); }
      in.acc = bits(w1, 23, 23);
      uint16_t rb = in.acc ? OPC_AGPR : OPC_VGPR;
      in.src[0] = OPC_VGPR + bits(w1, 7, 0);
      in.src[1] = rb + bits(w1, 15, 8); in.nbits[1] = fb("vdata", 32);
      in.srsrc = bits(w1, 20, 16) * 4;
      in.soffset = bits(w1, 31, 24);
      if (in.soffset >= 128) set_src(in, 3, in.soffset, 32, "B32");
      in.nbits[0] = (in.offen && in.idxen) ? 64 : 32;
      break;
    }
  }
  in.key = enc * 1024 + op;
  return true;
}

// ---------------------------------------------------------------- disassembly
static std::string sreg_name(int c, int nregs) {
  char b[48];
  if (c <= 101) {
    if (nregs <= 1) snprintf(b, sizeof b, "s%d", c); else snprintf(b, sizeof b, "s[%d:%d]", c, c + nregs - 1);
    return b;
  }
  if (c >= 108 && c <= 123) {
    int t = c - 108;
    if (nregs <= 1) snprintf(b, sizeof b, "ttmp%d", t); else snprintf(b, sizeof b, "ttmp[%d:%d]", t, t + nregs - 1);
    return b;
  }
  switch (c) {
    case 102: return nregs > 1 ? "flat_scratch" : "flat_scratch_lo";
    case 103: return "flat_scratch_hi";
    case 104: return nregs > 1 ? "xnack_mask" : "xnack_mask_lo";
    case 105: return "xnack_mask_hi";
    case 106: return nregs > 1 ? "vcc" : "vcc_lo";
    case 107: return "vcc_hi";
    case 124: return "m0";
    case 125: return "null";
    case 126: return nregs > 1 ? "exec" : "exec_lo";
    case 127: return "exec_hi";
    case 235: return "src_shared_base";
    case 236: return "src_shared_limit";
    case 237: return "src_private_base";
    case 238: return "src_private_limit";
    case 239: return "src_pops_exiting_wave_id";
    case 251: return "src_vccz";
    case 252: return "src_execz";
    case 253: return "src_scc";
    case 254: return "src_lds_direct";
  }
  snprintf(b, sizeof b, "s?%d", c);
  return b;
}

static std::string opnd(const Inst& in, uint16_t c, int nbits, int idx = -1) {
  int nregs = nbits <= 32 ? 1 : (nbits + 31) / 32;
  char b[64];
  if (c == OPC_NONE) return "off";
  if (c >= OPC_AGPR || (c >= OPC_VGPR)) {
    char pfx = c >= OPC_AGPR ? 'a' : 'v';
    int r = c >= OPC_AGPR ? c - OPC_AGPR : c - OPC_VGPR;
    if (nregs == 1) snprintf(b, sizeof b, "%c%d", pfx, r); else snprintf(b, sizeof b, "%c[%d:%d]", pfx, r, r + nregs - 1);
    return b;
  }
  if (c >= 128 && c <= 192) return std::to_string(c - 128);
  if (c >= 193 && c <= 208) return std::to_string(-(c - 192));
  if (c >= 240 && c <= 248) {
    static const char* f[] = {"0.5", "-0.5", "1.0", "-1.0", "2.0", "-2.0", "4.0", "-4.0", "0.15915494"};
    return f[c - 240];
  }
  if (c == 255) { snprintf(b, sizeof b, "0x%x", nbits == 16 ? (in.lit & 0xffff) : in.lit); return b; }
  (void)idx;
  return sreg_name(c, nregs);
}

static std::string fmt_hex(uint32_t v) { char b[16]; snprintf(b, sizeof b, "0x%x", v); return b; }

// VGPR index-mode mask as LLVM prints it: gpr_idx(SRC0,SRC1,SRC2,DST) (bits 0..3), gpr_idx() for none
static std::string gpr_idx_str(int32_t m) {
  static const char* names[4] = {"SRC0", "SRC1", "SRC2", "DST"};
  std::string s = "gpr_idx(";
  bool comma = false;
  for (int i = 0; i < 4; i++)
    if (m >> i & 1) { if (comma) s += ","; s += names[i]; comma = true; }
  return s + ")";
}

static std::string waitcnt_str(uint32_t s) {
  int vm = (s & 0xf) | (((s >> 14) & 3) << 4), exp = (s >> 4) & 7, lgkm = (s >> 8) & 0xf;
  std::string r;
  if (vm != 63) r += "vmcnt(" + std::to_string(vm) + ")";
  if (exp != 7) r += std::string(r.empty() ? "" : " ") + "expcnt(" + std::to_string(exp) + ")";
  if (lgkm != 15) r += std::string(r.empty() ? "" : " ") + "lgkmcnt(" + std::to_string(lgkm) + ")";
  if (r.empty()) r = "vmcnt(63) expcnt(7) lgkmcnt(15)";
  return r;
}

static std::string dpp_str(const Inst& in) {
  unsigned c = in.dpp_ctrl;
  char b[64];
  if (c <= 0xff) snprintf(b, sizeof b, "quad_perm:[%u,%u,%u,%u]", c & 3, (c >> 2) & 3, (c >> 4) & 3, (c >> 6) & 3);
  else if (c >= 0x101 && c <= 0x10f) snprintf(b, sizeof b, "row_shl:%u", c & 0xf);
  else if (c >= 0x111 && c <= 0x11f) snprintf(b, sizeof b, "row_shr:%u", c & 0xf);
  else if (c >= 0x121 && c <= 0x12f) snprintf(b, sizeof b, "row_ror:%u", c & 0xf);
  else if (c == 0x130) snprintf(b, sizeof b, "wave_shl:1");
  else if (c == 0x134) snprintf(b, sizeof b, "wave_rol:1");
  else if (c == 0x138) snprintf(b, sizeof b, "wave_shr:1");
  else if (c == 0x13c) snprintf(b, sizeof b, "wave_ror:1");
  else if (c == 0x140) snprintf(b, sizeof b, "row_mirror");
  else if (c == 0x141) snprintf(b, sizeof b, "row_half_mirror");
  else if (c == 0x142) snprintf(b, sizeof b, "row_bcast:15");
  else if (c == 0x143) snprintf(b, sizeof b, "row_bcast:31");
  else if (c >= 0x150 && c <= 0x15f) snprintf(b, sizeof b, "row_newbcast:%u", c & 0xf);
  else snprintf(b, sizeof b, "dpp_ctrl:0x%x", c);
  std::string r = b;
  snprintf(b, sizeof b, " row_mask:0x%x bank_mask:0x%x", in.row_mask, in.bank_mask);
  r += b;
  if (in.bound_ctrl) r += " bound_ctrl:0";
  return r;
}

static const char* sel_names[] = {"BYTE_0", "BYTE_1", "BYTE_2", "BYTE_3", "WORD_0", "WORD_1", "DWORD", "?"};

std::string disasm_inst(const Inst& in) {
  const IsaRow* r = in.row;
  if (!r) return "<unknown>";
  std::string name = r->name;
  int enc = in.src_enc;
  std::ostringstream os;
  auto fb = [&](const char* f, int d) { return r->bits(f, d); };
  if (enc == ENC_VOP1 || enc == ENC_VOP2 || enc == ENC_VOPC) {
    if (in.ext) {
      auto pos = name.rfind("_e32");
      if (pos != std::string::npos) name = name.substr(0, pos);
      name += in.ext == 1 ? "_dpp" : "_sdwa";
    }
  }
  if (enc == ENC_VOP3 && r->vop3sd && in.op >= 281 && in.op <= 286) name += "_e64";
  os << name;
  std::vector<std::string> ops;
  // gfx950 v_bitop3_*: the VOP3 ABS/NEG/OMOD fields hold the truth table, printed as bitop3:0xNN
  const bool bitop3 = enc == ENC_VOP3 && r->name.rfind("v_bitop3_", 0) == 0;
  auto src_s = [&](int i, const char* fname) {
    std::string s = opnd(in, in.src[i], fb(fname, 32), i);
    if (bitop3) return s;
    if (in.abs >> i & 1) s = "|" + s + "|";
    if (in.neg >> i & 1) s = "-" + s;
    if (in.ext == 2 && i < 2 && in.src_sext[i]) s = "sext(" + s + ")";  // SDWA integer sign extension
    return s;
  };
  switch (enc) {
    case ENC_SOP1: case ENC_SOP2: case ENC_SOPC: {
      bool hasdst = enc != ENC_SOPC && r->fields.count("sdst");
      if (hasdst) ops.push_back(opnd(in, in.sdst, fb("sdst", 32)));
      if (r->fields.count("ssrc0")) ops.push_back(opnd(in, in.src[0], fb("ssrc0", 32)));
      if (enc == ENC_SOPC && in.op == 17) ops.push_back(gpr_idx_str(in.simm));  // s_set_gpr_idx_on
      else if (enc != ENC_SOP1 && r->fields.count("ssrc1")) ops.push_back(opnd(in, in.src[1], fb("ssrc1", 32)));
      break;
    }
    case ENC_SOPK:
      if (r->fields.count("sdst")) ops.push_back(opnd(in, in.sdst, fb("sdst", 32)));
      if (in.op == 17 || in.op == 18 || in.op == 20) {
        int id = in.simm & 0x3f, off = (in.simm >> 6) & 0x1f, sz = ((in.simm >> 11) & 0x1f) + 1;
        std::string h = "hwreg(" + std::to_string(id) + ", " + std::to_string(off) + ", " + std::to_string(sz) + ")";
        if (in.op == 18) ops.insert(ops.begin(), h); else if (in.op == 20) { ops.clear(); ops.push_back(h); ops.push_back(fmt_hex(in.lit)); } else ops.push_back(h);
      } else ops.push_back(fmt_hex((uint16_t)in.simm));
      break;
    case ENC_SOPP: {
      int op = in.op;
      if (op == 12) ops.push_back(waitcnt_str((uint16_t)in.simm));
      else if (op == 1 || op == 10 || op == 19 || op == 27 || op == 3 || op == 28) {}  // 28: s_set_gpr_idx_off
      else if (op == 29) ops.push_back(gpr_idx_str(in.simm));                          // s_set_gpr_idx_mode
      else if (op == 2 || (op >= 4 && op <= 9) || (op >= 23 && op <= 26)) {
        int64_t t = (int64_t)in.pc + 4 + 4 * (int64_t)in.simm;
        ops.push_back(std::to_string(in.simm) + " ; -> " + fmt_hex((uint32_t)t));
      } else ops.push_back(std::to_string(op == 0 || op == 14 || op == 15 ? (uint16_t)in.simm : (uint16_t)in.simm));
      break;
    }
    case ENC_SMEM: {
      ops.push_back(opnd(in, in.sdst, fb("sdata", 32)));
      ops.push_back(opnd(in, in.sbase, fb("sbase", 64)));
      if (in.imm) ops.push_back(fmt_hex((uint32_t)in.simm & 0x1fffff));
      if (in.soffset_en) ops.push_back(opnd(in, in.soffset, 32));
      if (!in.imm && !in.soffset_en) ops.push_back(opnd(in, in.simm & 0x7f, 32));
      break;
    }
    case ENC_VOP1: case ENC_VOP2: case ENC_VOPC: {
      if (enc != ENC_VOPC) { if (r->fields.count("vdst") || in.dst != OPC_NONE) ops.push_back(opnd(in, in.dst, fb("vdst", 32))); }
      else ops.push_back(in.ext == 2 && in.sdwa_sdst ? opnd(in, in.sdst, 64) : "vcc");
      if (enc == ENC_VOP2 && (in.op == 25 || in.op == 26 || in.op == 27 || in.op == 28 || in.op == 29 || in.op == 30)) ops.push_back("vcc");
      if (r->fields.count("src0")) ops.push_back(src_s(0, "src0"));
      if (enc == ENC_VOP2 && (in.op == 23 || in.op == 36)) ops.push_back(fmt_hex(in.lit));
      if (enc != ENC_VOP1) ops.push_back(src_s(1, "vsrc1"));
      if (enc == ENC_VOP2 && (in.op == 24 || in.op == 37)) ops.push_back(fmt_hex(in.lit));
      if (enc == ENC_VOP2 && (in.op == 0 || in.op == 28 || in.op == 29 || in.op == 30)) ops.push_back("vcc");
      break;
    }
    case ENC_VOP3: {
      if (in.op < 256) ops.push_back(opnd(in, in.sdst, 64));
      else if (r->fields.count("vdst")) ops.push_back(opnd(in, in.dst, fb("vdst", 32)));
      if (r->vop3sd) ops.push_back(opnd(in, in.sdst, 64));
      const char* names[3] = {"src0", "src1", "src2"};
      for (int i = 0; i < 3; i++) if (r->fields.count(names[i])) ops.push_back(src_s(i, names[i]));
      if ((in.op == 256 || in.op == 284 || in.op == 285 || in.op == 286) && !r->fields.count("src2")) ops.push_back(opnd(in, in.src[2], 64));
      break;
    }
    case ENC_VOP3P: case ENC_VOP3PX2: {
      ops.push_back(opnd(in, in.dst, fb("vdst", 32)));
      const char* names[3] = {"src0", "src1", "src2"};
      bool f8f6f4 = r->name.find("f8f6f4") != std::string::npos;
      for (int i = 0; i < 3; i++) if (r->fields.count(names[i])) ops.push_back(opnd(in, in.src[i], (f8f6f4 && i < 2) ? in.nbits[i] : fb(names[i], 32)));
      if (enc == ENC_VOP3PX2) { ops.push_back(opnd(in, in.scale_src[0], 32)); ops.push_back(opnd(in, in.scale_src[1], 32)); }
      break;
    }
    case ENC_DS: {
      if (in.dst != OPC_NONE) ops.push_back(opnd(in, in.dst, fb("vdst", 32)));
      if (in.src[0] != OPC_NONE) ops.push_back(opnd(in, in.src[0], 32));
      if (in.src[1] != OPC_NONE) ops.push_back(opnd(in, in.src[1], fb("data0", 32)));
      if (in.src[2] != OPC_NONE) ops.push_back(opnd(in, in.src[2], fb("data1", 32)));
      break;
    }
    case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH: {
      if (in.dst != OPC_NONE) ops.push_back(opnd(in, in.dst, fb("vdst", 32)));
      ops.push_back(in.src[0] == OPC_NONE ? "off" : opnd(in, in.src[0], in.nbits[0]));
      if (in.src[1] != OPC_NONE) ops.push_back(opnd(in, in.src[1], fb("data", 32)));
      if (enc != ENC_FLAT) ops.push_back(in.saddr == 0x7f ? "off" : opnd(in, in.saddr, enc == ENC_SCRATCH ? 32 : 64));
      break;
    }
    case ENC_MUBUF: case ENC_MTBUF: {
      if (enc == ENC_MUBUF && (in.op == 40 || in.op == 41)) break;  // buffer_wbl2 / buffer_inv: no operands
      if (r->fields.count("vdata") && !in.lds) ops.push_back(opnd(in, in.src[1], fb("vdata", 32)));
      ops.push_back((in.offen || in.idxen) ? opnd(in, in.src[0], in.nbits[0]) : "off");
      ops.push_back(opnd(in, in.srsrc, 128));
      ops.push_back(opnd(in, in.soffset, 32));
      break;
    }
  }
  for (size_t i = 0; i < ops.size(); i++) os << (i ? ", " : " ") << ops[i];
  // modifiers
  switch (enc) {
    case ENC_SMEM: if (in.glc) os << " glc"; break;
    case ENC_VOP1: case ENC_VOP2: case ENC_VOPC:
      if (in.ext == 1) os << " " << dpp_str(in);
      if (in.ext == 2) {
        if (in.clamp) os << " clamp";
        bool nodst = in.row->name.rfind("v_cvt_f32_fp8", 0) == 0 || in.row->name.rfind("v_cvt_f32_bf8", 0) == 0 || in.row->name.rfind("v_cvt_pk_f32_", 0) == 0;
        if (enc != ENC_VOPC && !nodst) os << " dst_sel:" << sel_names[in.dst_sel] << " dst_unused:" << (in.dst_unused == 0 ? "UNUSED_PAD" : in.dst_unused == 1 ? "UNUSED_SEXT" : "UNUSED_PRESERVE");
        os << " src0_sel:" << sel_names[in.src_sel[0]];
        if (enc != ENC_VOP1) os << " src1_sel:" << sel_names[in.src_sel[1]];
      }
      break;
    case ENC_VOP3:
      if (in.opsel) {
        int ns = (int)r->fields.count("src0") + (int)r->fields.count("src1") + (int)r->fields.count("src2");
        // byte select of the destination in op_sel[3:2]
        if (r->name.rfind("v_cvt_sr_", 0) == 0 || r->name.rfind("v_cvt_scalef32_pk_fp4_", 0) == 0 ||
            r->name.rfind("v_cvt_scalef32_sr_pk_fp4_", 0) == 0) ns = 3;
        os << " op_sel:[";
        for (int i = 0; i < ns; i++) os << (in.opsel >> i & 1) << ",";
        os << (in.opsel >> 3 & 1) << "]";
      }
      if (in.clamp) os << " clamp";
      if (bitop3) {
        const unsigned tt = ((unsigned)in.omod << 6) | ((unsigned)in.abs << 3) | in.neg;
        if (tt) os << " bitop3:0x" << std::hex << tt << std::dec;
      } else if (in.omod == 1) os << " mul:2"; else if (in.omod == 2) os << " mul:4"; else if (in.omod == 3) os << " div:2";
      break;
    case ENC_VOP3P: case ENC_VOP3PX2:
      if (in.row && (in.row->name.rfind("v_mfma", 0) == 0 || in.row->name.rfind("v_smfmac", 0) == 0)) {
        bool f64 = in.row->name.find("_f64") != std::string::npos;
        if (enc == ENC_VOP3PX2) os << " op_sel:[" << (in.scale_opsel[0] & 1) << "," << (in.scale_opsel[1] & 1) << ",0] op_sel_hi:[" << (in.scale_opsel[0] >> 1) << "," << (in.scale_opsel[1] >> 1) << ",0]";
        if (in.cbsz) os << " cbsz:" << (int)in.cbsz;
        if (in.abid && enc != ENC_VOP3PX2) os << " abid:" << (int)in.abid;
        if (in.blgp && !f64) os << " blgp:" << (int)in.blgp;
        if (in.blgp && f64) os << " neg:[" << (in.blgp & 1) << "," << (in.blgp >> 1 & 1) << "," << (in.blgp >> 2 & 1) << "]";
      } else if (!(in.op == 88 || in.op == 89)) {
        if (in.opsel) os << " op_sel:[" << (in.opsel & 1) << "," << (in.opsel >> 1 & 1) << "," << (in.opsel >> 2 & 1) << "]";
        if (in.opsel_hi != 7) os << " op_sel_hi:[" << (in.opsel_hi & 1) << "," << (in.opsel_hi >> 1 & 1) << "," << (in.opsel_hi >> 2 & 1) << "]";
        if (in.neg) os << " neg_lo:[" << (in.neg & 1) << "," << (in.neg >> 1 & 1) << "," << (in.neg >> 2 & 1) << "]";
        if (in.neg_hi) os << " neg_hi:[" << (in.neg_hi & 1) << "," << (in.neg_hi >> 1 & 1) << "," << (in.neg_hi >> 2 & 1) << "]";
        if (in.clamp) os << " clamp";
      }
      break;
    case ENC_DS:
      if (in.row->name.find("2") != std::string::npos && (in.row->name.find("read2") != std::string::npos || in.row->name.find("write2") != std::string::npos || in.row->name.find("wrxchg2") != std::string::npos)) {
        if (in.offset) os << " offset0:" << in.offset;
        if (in.offset1) os << " offset1:" << in.offset1;
      } else {
        uint32_t o = in.offset | (in.offset1 << 8);
        if (in.op == 61) { os << " offset:" << o; }
        else if (o) os << " offset:" << o;
      }
      if (in.gds) os << " gds";
      break;
    case ENC_FLAT: case ENC_GLOBAL: case ENC_SCRATCH:
      if (in.offset) os << " offset:" << (int32_t)in.offset;
      if (in.glc) os << " sc0";
      if (in.nt) os << " nt";
      if (in.sc1) os << " sc1";
      break;
    case ENC_MUBUF: case ENC_MTBUF:
      if (in.idxen) os << " idxen";  // LLVM's order: idxen before offen
      if (in.offen) os << " offen";
      if (in.offset) os << " offset:" << in.offset;
      if (in.glc) os << " sc0";
      if (in.nt) os << " nt";
      if (in.sc1) os << " sc1";
      if (in.lds) os << " lds";
      break;
  }
  return os.str();
}

}  // namespace mmemu
