// The PTX instructions the packed attention kernel (packed_attention_cuda.cu)
// is built from, as inline functions (and its cp.async copy of a key tile),
// and the fragment layouts it relies on.
// sm_80 and later. Private to that kernel.
//
// Fragment layouts relied on (PTX ISA, "Matrix Fragments for mma.m16n8k16
// with floating point type"; g = lane >> 2, t = lane & 3; a register's lower
// half holds the lower-numbered element):
//  - A (16 x 16, row-major): reg0 = row g, cols 2t, 2t+1; reg1 = row g+8,
//    same cols; reg2 = row g, cols 2t+8, 2t+9; reg3 = row g+8, cols 2t+8, 2t+9.
//  - B (16 x 8, "col"): reg0 = rows (k) 2t, 2t+1 of col (n) g; reg1 = rows
//    2t+8, 2t+9 of col g.
//  - C/D (16 x 8, FP32): c0, c1 = row g, cols 2t, 2t+1; c2, c3 = row g+8.
//  So the C fragments of S for keys 16j .. 16j+7 ({c0 c1}, {c2 c3}) and
//  16j+8 .. 16j+15 (same), packed in pairs, are exactly A regs 0-3 of P for
//  the P·V k-step over keys 16j .. 16j+15.
// ldmatrix (PTX ISA, "Warp-level matrix load instruction: ldmatrix"): for .x4,
// lanes 8i .. 8i+7 give the shared addresses of rows 0-7 of 8x8 matrix i,
// which lands in destination register i; lane l receives row l/4, elements
// 2(l%4), 2(l%4)+1 of each matrix, or with .trans column l/4, rows 2(l%4),
// 2(l%4)+1 (in terms of the rows addressed).
//  - Q [query][d]: matrices (rows 0-7, d 16k..), (rows 8-15, d 16k..), (rows
//    0-7, d 16k+8..), (rows 8-15, d 16k+8..) are A regs 0-3 of d-step k.
//  - K [key][d] row-major is K^T column-major, so plain ldmatrix gives B of
//    Q·K^T: matrices (keys 8n .. 8n+7, d 32p + 8i), i = 0..3, are B regs 0, 1
//    of d-step 2p and B regs 0, 1 of d-step 2p+1, for key n-tile n.
//  - V [key][d] with .trans gives B of P·V: matrices (keys 16j.., d 8n..),
//    (keys 16j+8.., d 8n..), (keys 16j.., d 8n+8..), (keys 16j+8.., d 8n+8..)
//    are B regs 0, 1 of d n-tile n and B regs 0, 1 of n-tile n+1.
// So each lane holds, per m-tile, rows g and g+8 of it: S and P at keys
// 8n + 2t and 8n + 2t + 1 of every key n-tile n; O at d 8n + 2t and
// 8n + 2t + 1 of every d n-tile n; the running max m of both rows; l as a C
// fragment (each column holds the row's sum).
#ifndef INFER_MODELS_PACKED_ATTENTION_PTX_CUH_
#define INFER_MODELS_PACKED_ATTENTION_PTX_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

namespace infer::cuda::ptx {

__device__ __forceinline__ uint32_t SharedAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; bytes past `src_bytes` (0 or 16)
// are zero-filled and nothing is read for them.
__device__ __forceinline__ void CopyAsync16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst),
               "l"(__cvta_generic_to_global(src)), "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void CommitCopies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

__device__ __forceinline__ void WaitCopies() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }

__device__ __forceinline__ void LoadMatrixX4(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void LoadMatrixX4Trans(uint32_t addr, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// d += a·b for one m16n8k16 tile, FP16 inputs, FP32 accumulators.
__device__ __forceinline__ void Mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A read the compiler neither hoists nor merges with an earlier one.
__device__ __forceinline__ int LoadVolatile(const int32_t* p) {
  int v;
  asm volatile("ld.global.nc.b32 %0, [%1];\n" : "=r"(v) : "l"(__cvta_generic_to_global(p)));
  return v;
}

// 2^x; -inf gives +0.
__device__ __forceinline__ float Exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Two floats rounded to FP16, `lo` in the low half (the lower column).
__device__ __forceinline__ uint32_t PackHalf2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  uint32_t u;
  memcpy(&u, &h, sizeof(u));
  return u;
}

// Starts copying the `count` (<= kKeyTile) keys of a tile: K row r from
// tile + r * stride, V row r from there + hidden, into the stage at shared
// addresses kdst / vdst. Rows from `count` on are zero-filled (source size 0:
// nothing is read; the address given is the tile's row 0). Offsets within a
// tile fit in int: 63 * stride + kD < 2^31 for heads <= 65535, kD <= 128.
template <class C>
__device__ __forceinline__ void CopyKeyTile(const __half* tile, int stride, int hidden, int count,
                                            uint32_t kdst, uint32_t vdst) {
  constexpr int kRowsPerStep = C::kThreads / C::kChunks;
  static_assert(C::kThreads % C::kChunks == 0, "a thread copies one column chunk");
  // The thread index is re-read (volatile) on every call: recomputing this
  // thread's offsets is cheaper than keeping them live across the math, which
  // made ptxas spill them at the register budgets used here.
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
  const int row0 = tid / C::kChunks;
  const int c = (tid % C::kChunks) * 8;
#pragma unroll
  for (int step = 0; step < C::kKeyTile / kRowsPerStep; ++step) {
    const int row = row0 + step * kRowsPerStep;
    const bool inside = row < count;
    const __half* src = tile + (inside ? row * stride + c : 0);
    const uint32_t off = static_cast<uint32_t>(row * C::kRowBytes + c * 2);
    CopyAsync16(kdst + off, src, inside ? 16 : 0);
    CopyAsync16(vdst + off, src + hidden, inside ? 16 : 0);
  }
}

}  // namespace infer::cuda::ptx

#endif  // INFER_MODELS_PACKED_ATTENTION_PTX_CUH_
