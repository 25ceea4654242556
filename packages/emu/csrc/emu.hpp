// moonmath-emu core: shared types.
#pragma once
#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace mmemu {

// ---------------------------------------------------------------- errors
struct EmuError : std::runtime_error { using std::runtime_error::runtime_error; };
struct MemoryViolation : EmuError { using EmuError::EmuError; };
struct HazardError : EmuError { using EmuError::EmuError; };
struct UnsupportedInstruction : EmuError { using EmuError::EmuError; };
struct LaneError : EmuError { using EmuError::EmuError; };  // lane checker (check_lanes)

// ---------------------------------------------------------------- ISA tables
enum Enc : uint8_t {
  ENC_SOP2, ENC_SOPK, ENC_SOP1, ENC_SOPC, ENC_SOPP, ENC_SMEM, ENC_VOP2, ENC_VOP1, ENC_VOPC, ENC_VOP3,
  ENC_VOP3P, ENC_DS, ENC_FLAT, ENC_GLOBAL, ENC_SCRATCH, ENC_MUBUF, ENC_MTBUF, ENC_VOP3PX2, ENC_COUNT
};
const char* enc_name(int enc);

struct FieldInfo { int bits = 0; std::string fmt; };
struct IsaRow {
  int enc = 0, op = 0;
  std::string name;
  bool vop3sd = false;
  int avail = 3;  // bit 0: gfx942, bit 1: gfx950 (LLVM assembler)
  std::map<std::string, FieldInfo> fields;
  int bits(const char* f, int dflt) const {
    auto it = fields.find(f);
    return it == fields.end() ? dflt : it->second.bits;
  }
  std::string fmt(const char* f) const {
    auto it = fields.find(f);
    return it == fields.end() ? std::string() : it->second.fmt;
  }
};
const IsaRow* isa_lookup(int enc, int op);
const std::vector<IsaRow>& isa_rows();

// ---------------------------------------------------------------- code object
struct KernelArg { std::string name; uint32_t offset = 0, size = 0; std::string value_kind; };

struct KernelDesc {
  std::string name;
  uint64_t code_offset = 0;  // file offset of the first instruction
  uint64_t entry_vaddr = 0;  // virtual address of the first instruction
  uint64_t code_size = 0;
  // kernel descriptor
  uint32_t group_segment_fixed_size = 0, private_segment_fixed_size = 0, kernarg_size = 0;
  int64_t kernel_code_entry_byte_offset = 0;
  uint32_t rsrc1 = 0, rsrc2 = 0, rsrc3 = 0;
  uint16_t kernel_code_properties = 0;
  // decoded
  int vgpr_granules = 0, sgpr_granules = 0;
  int vgpr_count = 0;       // arch + acc (unified, from the granule)
  int accum_offset = 0;     // in VGPRs (rsrc3)
  int float_round_32 = 0, float_round_16_64 = 0, float_denorm_32 = 0, float_denorm_16_64 = 0;
  bool dx10_clamp = false, ieee_mode = false;
  int user_sgpr_count = 0;
  bool enable_private_segment = false;
  bool wg_id_x = false, wg_id_y = false, wg_id_z = false, wg_info = false;
  int vgpr_workitem_id = 0;  // 0:x 1:xy 2:xyz
  int granulated_lds = 0;
  int tg_split = 0;
  // kernel code properties
  bool kp_private_segment_buffer = false, kp_dispatch_ptr = false, kp_queue_ptr = false,
       kp_kernarg_segment_ptr = false, kp_dispatch_id = false, kp_flat_scratch_init = false,
       kp_private_segment_size = false, kp_wavefront_size32 = false, kp_dynamic_stack = false;
  int kernarg_preload_length = 0, kernarg_preload_offset = 0;
  // metadata (msgpack note)
  std::vector<KernelArg> args;
  int md_vgpr = -1, md_agpr = -1, md_sgpr = -1, md_wavefront = 64;
  uint32_t md_kernarg_size = 0;
  uint32_t md_kernarg_align = 8;
};

struct CodeObject {
  std::vector<uint8_t> image;  // the ELF bytes
  int mach = 0;                // e_flags & 0xff
  std::string arch;            // gfx942 / gfx950
  bool gfx950 = false;
  std::vector<KernelDesc> kernels;
  std::vector<uint8_t> loaded;            // PT_LOAD segments laid out by virtual address (vaddr 0 = loaded[0])
  std::vector<std::pair<uint64_t, uint64_t>> text;  // executable ranges (vaddr, size)
  const KernelDesc* find(const std::string& n) const {
    for (auto& k : kernels) if (k.name == n) return &k;
    return nullptr;
  }
};

CodeObject load_code_object(const uint8_t* data, size_t n);

// ---------------------------------------------------------------- decoded instruction
// Operand codes (10 bits): 0..255 hardware scalar source codes (SGPRs, VCC, M0, EXEC, inline
// constants, 255 = literal ...), 256..511 VGPR v0..v255, 512..767 AGPR a0..a255.
enum : uint16_t { OPC_VGPR = 256, OPC_AGPR = 512, OPC_NONE = 0xffff };

struct Inst {
  uint32_t pc = 0;       // byte offset from the kernel's first instruction
  uint8_t size = 4;
  uint8_t enc = 0;       // encoding as decoded (VOP1/VOP2/VOPC kept), see is_vop3_space
  uint8_t src_enc = 0;   // original encoding
  uint16_t op = 0;       // opcode in `enc` space; VOP1/2/C are remapped into VOP3 space
  uint32_t key = 0;      // enc*1024 + op (VOP1/2/C are in VOP3 space)
  const IsaRow* row = nullptr;
  uint32_t w0 = 0, w1 = 0, w2 = 0, w3 = 0;
  // generic operand codes
  uint16_t dst = OPC_NONE, sdst = OPC_NONE;
  uint16_t src[4] = {OPC_NONE, OPC_NONE, OPC_NONE, OPC_NONE};
  uint16_t nbits[4] = {32, 32, 32, 32};  // source widths
  uint16_t dst_bits = 32;
  uint32_t lit = 0;
  bool has_lit = false;
  uint64_t cval[4] = {0, 0, 0, 0};  // precomputed constant value per source (inline or literal)
  uint8_t is_const[4] = {0, 0, 0, 0};
  uint8_t abs = 0, neg = 0, neg_hi = 0, opsel = 0, opsel_hi = 0, clamp = 0, omod = 0;
  // DPP / SDWA
  uint8_t ext = 0;  // 0 none, 1 DPP, 2 SDWA
  uint16_t dpp_ctrl = 0; uint8_t row_mask = 0xf, bank_mask = 0xf, bound_ctrl = 0;
  uint8_t dst_sel = 6, dst_unused = 0, src_sel[2] = {6, 6}, src_sext[2] = {0, 0};
  uint8_t sdwa_sdst = 0;  // VOPC SDWA: explicit sdst present
  // scalar / memory
  int32_t simm = 0;      // SOPK simm16 (sign-extended), SOPP simm16, SMEM offset
  uint32_t offset = 0, offset1 = 0;
  uint8_t glc = 0, sc1 = 0, nt = 0, offen = 0, idxen = 0, lds = 0, acc = 0, gds = 0, seg = 0;
  uint16_t saddr = OPC_NONE, soffset = OPC_NONE, srsrc = OPC_NONE, sbase = OPC_NONE;
  bool soffset_en = false, imm = false;
  // MAI
  uint8_t cbsz = 0, abid = 0, blgp = 0, acc_cd = 0;
  const void* mfma = nullptr;  // const MfmaInfo*
  uint16_t scale_src[2] = {OPC_NONE, OPC_NONE};
  uint8_t scale_opsel[2] = {0, 0};
  int32_t target = -1;  // branch target instruction index
  uint8_t klass = 0;    // counter class
};

enum Klass : uint8_t { K_SALU, K_VALU, K_TRANS, K_SMEM, K_VMEM, K_DS, K_WAITCNT, K_BARRIER, K_MFMA, K_BRANCH, K_OTHER };

// decode one instruction at `p` (bytes remaining n); returns false if it cannot be decoded
bool decode_inst(const uint8_t* p, size_t n, bool gfx950, Inst& out, std::string& err);
std::string disasm_inst(const Inst& in);
bool mnemonic_supported(const Inst& in);

}  // namespace mmemu
