// Internal: the part of NCCL's C interface that cudakit calls, declared here so that
// building cudakit needs no nccl.h (docs/design.md, decision 21). NCCL is opened at run
// time (nccl_api.hpp); these declarations give its types and the signatures of the
// entries resolved with dlsym, nothing more. The names, values and layouts are nccl.h's:
// tests/build_checks/nccl_declarations_check.cpp compares each one with the real header
// wherever one is installed.
//
// ncclConfig_t is the layout of NCCL 2.28 (ncclConfig_v22800) with that version in its
// initializer. NCCL reads a configuration by its size and version, so an older library
// (cudakit needs 2.18 or newer) reads the fields it knows and leaves the rest, as it does
// for a program compiled against a newer nccl.h.
//
// With CUDAKIT_NCCL_DECLARE_TYPES_ONLY defined, only the types are declared (the check
// declares them in a namespace of its own, beside the real header's).
#pragma once

#include <cuda.h>

#include <climits>
#include <cstddef>

// The version of the layouts below, as NCCL_VERSION(2, 28, 0) gives it.
#define CUDAKIT_NCCL_DECLARED_VERSION 22800

typedef struct ncclComm* ncclComm_t;

#define CUDAKIT_NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[CUDAKIT_NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
  ncclNumResults = 8
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9
} ncclDataType_t;

// NCCL keeps its operator enum the size of an int (its ncclMaxRedOp enumerator).
typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
  ncclMaxRedOp = 0x7fffffff
} ncclRedOp_t;

typedef struct {
  std::size_t size;       // set by the initializer; never touched
  unsigned int magic;     // likewise
  unsigned int version;   // likewise
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
  int splitShare;
  int trafficClass;
  const char* commName;
  int collnetEnable;
  int CTAPolicy;
  int shrinkShare;
  int nvlsCTAs;
  int nChannelsPerNetPeer;
  int nvlinkCentricSched;
} ncclConfig_t;

// "Not set" for a configuration's field: NCCL picks its own value.
#define CUDAKIT_NCCL_CONFIG_UNDEF_INT INT_MIN
#define CUDAKIT_NCCL_CONFIG_MAGIC 0xcafebeef
#define CUDAKIT_NCCL_SPLIT_NOCOLOR -1

#define CUDAKIT_NCCL_CONFIG_INITIALIZER                                                                          \
  {                                                                                                              \
    sizeof(ncclConfig_t), CUDAKIT_NCCL_CONFIG_MAGIC, CUDAKIT_NCCL_DECLARED_VERSION, CUDAKIT_NCCL_CONFIG_UNDEF_INT, \
        CUDAKIT_NCCL_CONFIG_UNDEF_INT, CUDAKIT_NCCL_CONFIG_UNDEF_INT, CUDAKIT_NCCL_CONFIG_UNDEF_INT, nullptr,      \
        CUDAKIT_NCCL_CONFIG_UNDEF_INT, CUDAKIT_NCCL_CONFIG_UNDEF_INT, nullptr, CUDAKIT_NCCL_CONFIG_UNDEF_INT,      \
        CUDAKIT_NCCL_CONFIG_UNDEF_INT, CUDAKIT_NCCL_CONFIG_UNDEF_INT, CUDAKIT_NCCL_CONFIG_UNDEF_INT,               \
        CUDAKIT_NCCL_CONFIG_UNDEF_INT, CUDAKIT_NCCL_CONFIG_UNDEF_INT                                               \
  }
#ifndef NCCL_CONFIG_INITIALIZER
#define NCCL_CONFIG_INITIALIZER CUDAKIT_NCCL_CONFIG_INITIALIZER
#endif
#ifndef NCCL_SPLIT_NOCOLOR
#define NCCL_SPLIT_NOCOLOR CUDAKIT_NCCL_SPLIT_NOCOLOR
#endif

// Every function cudakit resolves, X(result type, name, parameter list). The check
// compares each with the real header's declaration.
#define CUDAKIT_NCCL_FUNCTIONS(X)                                                                                    \
  X(ncclResult_t, ncclGetVersion, (int*))                                                                            \
  X(const char*, ncclGetErrorString, (ncclResult_t))                                                                 \
  X(const char*, ncclGetLastError, (ncclComm_t))                                                                     \
  X(ncclResult_t, ncclGetUniqueId, (ncclUniqueId*))                                                                  \
  X(ncclResult_t, ncclCommInitRankConfig, (ncclComm_t*, int, ncclUniqueId, int, ncclConfig_t*))                      \
  X(ncclResult_t, ncclCommSplit, (ncclComm_t, int, int, ncclComm_t*, ncclConfig_t*))                                 \
  X(ncclResult_t, ncclCommFinalize, (ncclComm_t))                                                                    \
  X(ncclResult_t, ncclCommDestroy, (ncclComm_t))                                                                     \
  X(ncclResult_t, ncclCommAbort, (ncclComm_t))                                                                       \
  X(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t, ncclResult_t*))                                                \
  X(ncclResult_t, ncclCommCount, (const ncclComm_t, int*))                                                           \
  X(ncclResult_t, ncclCommCuDevice, (const ncclComm_t, int*))                                                        \
  X(ncclResult_t, ncclCommUserRank, (const ncclComm_t, int*))                                                        \
  X(ncclResult_t, ncclAllReduce, (const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream)) \
  X(ncclResult_t, ncclReduce,                                                                                        \
    (const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t, CUstream))                       \
  X(ncclResult_t, ncclBroadcast, (const void*, void*, std::size_t, ncclDataType_t, int, ncclComm_t, CUstream))       \
  X(ncclResult_t, ncclAllGather, (const void*, void*, std::size_t, ncclDataType_t, ncclComm_t, CUstream))            \
  X(ncclResult_t, ncclReduceScatter,                                                                                 \
    (const void*, void*, std::size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t, CUstream))                            \
  X(ncclResult_t, ncclSend, (const void*, std::size_t, ncclDataType_t, int, ncclComm_t, CUstream))                  \
  X(ncclResult_t, ncclRecv, (void*, std::size_t, ncclDataType_t, int, ncclComm_t, CUstream))                        \
  X(ncclResult_t, ncclGroupStart, ())                                                                                \
  X(ncclResult_t, ncclGroupEnd, ())                                                                                  \
  X(ncclResult_t, ncclCommRegister, (const ncclComm_t, void*, std::size_t, void**))                                 \
  X(ncclResult_t, ncclCommDeregister, (const ncclComm_t, void*))

#ifndef CUDAKIT_NCCL_DECLARE_TYPES_ONLY
// Declared, never defined or linked: only their types are used (decltype of the address).
extern "C" {
#define CUDAKIT_X(result, name, parameters) result name parameters;
CUDAKIT_NCCL_FUNCTIONS(CUDAKIT_X)
#undef CUDAKIT_X
}
#endif
