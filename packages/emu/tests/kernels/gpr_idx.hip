// VGPR index mode (s_set_gpr_idx_on / s_set_gpr_idx_off): one indexed instruction per kernel in inline
// asm, on a table v20..v27 loaded from memory; v30..v37 (cleared first) are written back to memory.
#define KERNEL extern "C" __attribute__((global))
typedef unsigned int u32;
#define T __builtin_amdgcn_workitem_id_x()

#define GPR_IDX_KERNEL(NAME, MODE, INST)                                                              \
  KERNEL void NAME(const u32* in, u32* out, u32 idx) {                                                \
    const u32* p = in + T * 8;                                                                        \
    u32* q = out + T * 8;                                                                             \
    u32 r0, r1, r2, r3, r4, r5, r6, r7;                                                               \
    asm volatile(                                                                                     \
        "v_mov_b32 v20, %8\n\tv_mov_b32 v21, %9\n\tv_mov_b32 v22, %10\n\tv_mov_b32 v23, %11\n\t"      \
        "v_mov_b32 v24, %12\n\tv_mov_b32 v25, %13\n\tv_mov_b32 v26, %14\n\tv_mov_b32 v27, %15\n\t"    \
        "v_mov_b32 v30, 0\n\tv_mov_b32 v31, 0\n\tv_mov_b32 v32, 0\n\tv_mov_b32 v33, 0\n\t"            \
        "v_mov_b32 v34, 0\n\tv_mov_b32 v35, 0\n\tv_mov_b32 v36, 0\n\tv_mov_b32 v37, 0\n\t"            \
        "s_set_gpr_idx_on %16, " MODE "\n\t" INST "\n\ts_set_gpr_idx_off\n\t"                         \
        "v_mov_b32 %0, v30\n\tv_mov_b32 %1, v31\n\tv_mov_b32 %2, v32\n\tv_mov_b32 %3, v33\n\t"        \
        "v_mov_b32 %4, v34\n\tv_mov_b32 %5, v35\n\tv_mov_b32 %6, v36\n\tv_mov_b32 %7, v37"            \
        : "=&v"(r0), "=&v"(r1), "=&v"(r2), "=&v"(r3), "=&v"(r4), "=&v"(r5), "=&v"(r6), "=&v"(r7)      \
        : "v"(p[0]), "v"(p[1]), "v"(p[2]), "v"(p[3]), "v"(p[4]), "v"(p[5]), "v"(p[6]), "v"(p[7]),     \
          "s"(idx)                                                                                    \
        : "v20", "v21", "v22", "v23", "v24", "v25", "v26", "v27", "v30", "v31", "v32", "v33", "v34",  \
          "v35", "v36", "v37");                                                                       \
    q[0] = r0; q[1] = r1; q[2] = r2; q[3] = r3; q[4] = r4; q[5] = r5; q[6] = r6; q[7] = r7;          \
  }

GPR_IDX_KERNEL(idx_src0, "gpr_idx(SRC0)", "v_add_u32_e32 v30, v20, v21")
GPR_IDX_KERNEL(idx_src1, "gpr_idx(SRC1)", "v_add_u32_e32 v30, v20, v21")
GPR_IDX_KERNEL(idx_dst, "gpr_idx(DST)", "v_add_u32_e32 v30, v20, v21")
GPR_IDX_KERNEL(idx_src2, "gpr_idx(SRC2)", "v_add3_u32 v30, v20, v21, v22")
GPR_IDX_KERNEL(idx_all, "gpr_idx(SRC0,SRC1,SRC2,DST)", "v_add3_u32 v30, v20, v21, v22")
GPR_IDX_KERNEL(idx_const_src0, "gpr_idx(SRC0,SRC1)", "v_add_u32_e32 v30, 5, v21")
GPR_IDX_KERNEL(idx_none, "gpr_idx()", "v_add_u32_e32 v30, v20, v21")
