// CUDAKIT_API marks what the shared library exports. A shared build (CUDAKIT_BUILD_SHARED
// or BUILD_SHARED_LIBS) compiles with hidden visibility, so only the declarations marked
// here are visible to programs that link libcudakit.so; the static library exports
// everything, as static libraries do. Classes are marked as a whole (their members, type
// information and vtables), free functions one by one; templates defined in headers need
// no mark.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
/// Exported from libcudakit.so (and a no-op in a static build).
#define CUDAKIT_API __attribute__((visibility("default")))
#else
#define CUDAKIT_API
#endif
