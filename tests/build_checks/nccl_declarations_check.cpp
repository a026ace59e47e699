// cudakit's own NCCL declarations (src/libraries/nccl_declarations.hpp) against the real
// nccl.h, where one is installed: every type's size and layout, every enumerator's value,
// the configuration's initializer and every function's signature must match. Compiled
// with -fsyntax-only by BuildCheck.NcclDeclarationsMatchTheRealHeader: a mismatch is a
// failed static_assert naming what differs.
#include <cuda.h>

#include <climits>
#include <cstddef>
#include <type_traits>

#include <nccl.h>

namespace own {
#define CUDAKIT_NCCL_DECLARE_TYPES_ONLY
#include "libraries/nccl_declarations.hpp"
}  // namespace own

#if NCCL_VERSION_CODE < 21800
#error "the nccl.h found is older than NCCL 2.18, the oldest cudakit supports"
#endif

// Handles and the unique id.
static_assert(std::is_same_v<own::ncclComm_t, ::ncclComm_t>);
static_assert(CUDAKIT_NCCL_UNIQUE_ID_BYTES == NCCL_UNIQUE_ID_BYTES);
static_assert(sizeof(own::ncclUniqueId) == sizeof(::ncclUniqueId));

// The enumerations: same size, same values.
#define CUDAKIT_SAME_VALUE(name) \
  static_assert(static_cast<long long>(own::name) == static_cast<long long>(::name), #name);
static_assert(sizeof(own::ncclResult_t) == sizeof(::ncclResult_t));
static_assert(sizeof(own::ncclDataType_t) == sizeof(::ncclDataType_t));
static_assert(sizeof(own::ncclRedOp_t) == sizeof(::ncclRedOp_t));
CUDAKIT_SAME_VALUE(ncclSuccess)
CUDAKIT_SAME_VALUE(ncclUnhandledCudaError)
CUDAKIT_SAME_VALUE(ncclSystemError)
CUDAKIT_SAME_VALUE(ncclInternalError)
CUDAKIT_SAME_VALUE(ncclInvalidArgument)
CUDAKIT_SAME_VALUE(ncclInvalidUsage)
CUDAKIT_SAME_VALUE(ncclRemoteError)
CUDAKIT_SAME_VALUE(ncclInProgress)
CUDAKIT_SAME_VALUE(ncclNumResults)
CUDAKIT_SAME_VALUE(ncclInt8)
CUDAKIT_SAME_VALUE(ncclUint8)
CUDAKIT_SAME_VALUE(ncclInt32)
CUDAKIT_SAME_VALUE(ncclUint32)
CUDAKIT_SAME_VALUE(ncclInt64)
CUDAKIT_SAME_VALUE(ncclUint64)
CUDAKIT_SAME_VALUE(ncclFloat16)
CUDAKIT_SAME_VALUE(ncclFloat32)
CUDAKIT_SAME_VALUE(ncclFloat64)
CUDAKIT_SAME_VALUE(ncclBfloat16)
CUDAKIT_SAME_VALUE(ncclSum)
CUDAKIT_SAME_VALUE(ncclProd)
CUDAKIT_SAME_VALUE(ncclMax)
CUDAKIT_SAME_VALUE(ncclMin)
CUDAKIT_SAME_VALUE(ncclAvg)
CUDAKIT_SAME_VALUE(ncclMaxRedOp)
static_assert(CUDAKIT_NCCL_SPLIT_NOCOLOR == NCCL_SPLIT_NOCOLOR);

// The configuration: every field cudakit declares sits where the real header puts it; with
// a header of NCCL 2.28 or newer the whole layout is the same size.
#define CUDAKIT_SAME_FIELD(field)                                                                \
  static_assert(offsetof(own::ncclConfig_t, field) == offsetof(::ncclConfig_t, field), #field); \
  static_assert(sizeof(own::ncclConfig_t::field) == sizeof(::ncclConfig_t::field), #field);
CUDAKIT_SAME_FIELD(size)
CUDAKIT_SAME_FIELD(magic)
CUDAKIT_SAME_FIELD(version)
CUDAKIT_SAME_FIELD(blocking)
CUDAKIT_SAME_FIELD(cgaClusterSize)
CUDAKIT_SAME_FIELD(minCTAs)
CUDAKIT_SAME_FIELD(maxCTAs)
CUDAKIT_SAME_FIELD(netName)
CUDAKIT_SAME_FIELD(splitShare)
#if NCCL_VERSION_CODE >= 22800
CUDAKIT_SAME_FIELD(trafficClass)
CUDAKIT_SAME_FIELD(commName)
CUDAKIT_SAME_FIELD(collnetEnable)
CUDAKIT_SAME_FIELD(CTAPolicy)
CUDAKIT_SAME_FIELD(shrinkShare)
CUDAKIT_SAME_FIELD(nvlsCTAs)
CUDAKIT_SAME_FIELD(nChannelsPerNetPeer)
CUDAKIT_SAME_FIELD(nvlinkCentricSched)
static_assert(sizeof(own::ncclConfig_t) == sizeof(::ncclConfig_t));
static_assert(CUDAKIT_NCCL_DECLARED_VERSION <= NCCL_VERSION_CODE);
#endif

// The initializer: the same magic and the same "not set" for every field.
namespace own {
constexpr ncclConfig_t initial = CUDAKIT_NCCL_CONFIG_INITIALIZER;
}
constexpr ::ncclConfig_t real_initial = NCCL_CONFIG_INITIALIZER;
static_assert(own::initial.size == sizeof(own::ncclConfig_t));
static_assert(own::initial.magic == real_initial.magic);
static_assert(own::initial.version == CUDAKIT_NCCL_DECLARED_VERSION);
static_assert(own::initial.blocking == real_initial.blocking);
static_assert(own::initial.cgaClusterSize == real_initial.cgaClusterSize);
static_assert(own::initial.minCTAs == real_initial.minCTAs);
static_assert(own::initial.maxCTAs == real_initial.maxCTAs);
static_assert(own::initial.netName == real_initial.netName);
static_assert(own::initial.splitShare == real_initial.splitShare);

// Every function: the real declaration has the type cudakit's list gives it (expanded here
// with the real header's types).
#define CUDAKIT_SAME_SIGNATURE(result, name, parameters) \
  static_assert(std::is_same_v<decltype(&::name), result(*) parameters>, #name);
CUDAKIT_NCCL_FUNCTIONS(CUDAKIT_SAME_SIGNATURE)
