/*
 * abi.h: what collmux's GPU kernels and their host side must agree on,
 * written once. The C of fused/ includes it (through fused.h), and the
 * kernel module starts with it: fused.Source, CMakeLists.txt and
 * scripts/gpu-test.sh all put abi.h, kernels.cu and ops.cu one after the
 * other. Preprocessor definitions and enums only, which C and CUDA C read
 * alike.
 */
#ifndef CMX_FUSED_ABI_H
#define CMX_FUSED_ABI_H

/* the collectives' workspace */
#define CMX_MAX_RANKS 8       /* ranks of a communicator the kernels serve */
#define CMX_MAX_BLOCKS 64     /* blocks a job may use (rows of the flags) */
#define CMX_LL_MAX (256u << 10) /* largest all-reduce sent LL */
#define CMX_LL_BATCH 4        /* 8-byte LL lines a thread moves at once */
#define CMX_BELL_SLOTS 64     /* jobs the doorbell holds: job s in slot s % 64 (a power of 2, which 2^32 is a multiple of) */

/* Job codes: the kind, a protocol flag, then (<< 8) the element type and
 * op (type * 3 + op: sum, min, max) or the move's mode. */
enum { JOB_ALLREDUCE, JOB_MOVE, JOB_EXIT, JOB_LL = 0x10, JOB_TWOSHOT = 0x20 };

/* The element types of a job, in the numbering its code carries: the
 * host's name, the kernels' C type, and how they reduce it (PLAIN in its
 * own type, HALF in fp32 rounded once per step, as NCCL does). */
#define CMX_ELEMENT_TYPES(X)                                                                                        \
	X(T_F32, float, PLAIN) X(T_F64, double, PLAIN) X(T_I32, int, PLAIN) X(T_U32, unsigned, PLAIN)                \
	X(T_I64, long long, PLAIN) X(T_U64, unsigned long long, PLAIN) X(T_F16, f16, HALF) X(T_BF16, bf16, HALF)    \
	X(T_I16, short, PLAIN) X(T_U16, unsigned short, PLAIN) X(T_I8, signed char, PLAIN) X(T_U8, unsigned char, PLAIN)
#define CMX_ELEMENT_NAME(t, T, how) t,
enum { CMX_ELEMENT_TYPES(CMX_ELEMENT_NAME) T_COUNT };

/* the fused operations (ops.cu, ops.c) */
#define CMX_OPS_TILES 4096     /* the most tiles of one call */
#define CMX_OPS_THREADS 256    /* 8 warps a block */
#define CMX_OPS_RW 4           /* the most rows a warp computes in one tile */
#define CMX_OPS_TC_ROWS 32     /* the rows of a tile of the tensor-core GEMV */
#define CMX_OPS_EMB_TABLES 128 /* the most tables a rank owns in one embedding call */

#endif
