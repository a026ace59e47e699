// The CUDA Driver API entries cudakit calls, each pinned to the ABI version whose
// signature it calls (DESIGN 2). Written without the "cu" prefix so that cuda.h's
// remapping macros (cuCtxCreate -> cuCtxCreate_v4, cuMemAlloc -> cuMemAlloc_v2, ...)
// never touch these names: the version column alone decides which ABI we get.
//
// X(Name, AbiVersion, IntroducedIn)
//   Name         the entry without "cu"; the PFN type is PFN_cu<Name>_v<AbiVersion>
//   AbiVersion   the version passed to cuGetProcAddress_v2 (selects the signature)
//   IntroducedIn the first driver that has this entry at all (for error messages and
//                feature detection; the oldest supported driver is 12000)
//
// One place lists them all, so the fault-injection sweep and the source scan see
// every entry the library can call.
#pragma once

#define CUDAKIT_DRIVER_ENTRIES(X)                                  \
  /* initialisation, version, errors */                            \
  X(Init, 2000, 2000)                                              \
  X(DriverGetVersion, 2020, 2020)                                  \
  X(GetErrorName, 6000, 6000)                                      \
  X(GetErrorString, 6000, 6000)                                    \
  /* devices */                                                    \
  X(DeviceGet, 2000, 2000)                                         \
  X(DeviceGetCount, 2000, 2000)                                    \
  X(DeviceGetName, 2000, 2000)                                     \
  X(DeviceGetUuid, 11040, 11040)                                   \
  X(DeviceGetAttribute, 2000, 2000)                                \
  X(DeviceTotalMem, 3020, 3020)                                    \
  X(DeviceGetPCIBusId, 4010, 4010)                                 \
  X(DeviceCanAccessPeer, 4000, 4000)                               \
  X(DeviceGetP2PAttribute, 8000, 8000)                             \
  X(DeviceGetDefaultMemPool, 11020, 11020)                         \
  X(DevicePrimaryCtxRetain, 7000, 7000)                            \
  X(DevicePrimaryCtxRelease, 11000, 11000)                         \
  /* contexts */                                                   \
  X(CtxSetCurrent, 4000, 4000)                                     \
  X(CtxGetCurrent, 4000, 4000)                                     \
  X(CtxGetDevice, 2000, 2000)                                      \
  X(CtxSynchronize, 2000, 2000)                                    \
  X(CtxGetStreamPriorityRange, 5050, 5050)                         \
  X(CtxEnablePeerAccess, 4000, 4000)                               \
  X(MemGetInfo, 3020, 3020)                                        \
  /* streams */                                                    \
  X(StreamCreateWithPriority, 5050, 5050)                          \
  X(StreamDestroy, 4000, 4000)                                     \
  X(StreamQuery, 2000, 2000)                                       \
  X(StreamSynchronize, 2000, 2000)                                 \
  X(StreamWaitEvent, 3020, 3020)                                   \
  X(LaunchHostFunc, 10000, 10000)                                  \
  X(StreamGetPriority, 5050, 5050)                                 \
  X(StreamGetFlags, 5050, 5050)                                    \
  X(StreamGetCtx, 9020, 9020)                                      \
  X(StreamGetId, 12000, 12000)                                     \
  /* events */                                                     \
  X(EventCreate, 2000, 2000)                                       \
  X(EventDestroy, 4000, 4000)                                      \
  X(EventRecord, 2000, 2000)                                       \
  X(EventQuery, 2000, 2000)                                        \
  X(EventSynchronize, 2000, 2000)                                  \
  X(EventElapsedTime, 2000, 2000)                                  \
  /* memory */                                                     \
  X(MemAlloc, 3020, 3020)                                          \
  X(MemFree, 3020, 3020)                                           \
  X(MemAllocAsync, 11020, 11020)                                   \
  X(MemFreeAsync, 11020, 11020)                                    \
  X(MemAllocFromPoolAsync, 11020, 11020)                           \
  X(MemPoolSetAttribute, 11020, 11020)                             \
  X(MemPoolGetAttribute, 11020, 11020)                             \
  X(MemPoolTrimTo, 11020, 11020)                                   \
  X(MemHostAlloc, 2020, 2020)                                      \
  X(MemFreeHost, 2000, 2000)                                       \
  X(MemHostRegister, 6050, 4000)                                   \
  X(MemHostUnregister, 4000, 4000)                                 \
  X(MemHostGetDevicePointer, 3020, 3020)                           \
  X(MemcpyHtoDAsync, 3020, 3020)                                   \
  X(MemcpyDtoHAsync, 3020, 3020)                                   \
  X(MemcpyDtoDAsync, 3020, 3020)                                   \
  X(MemcpyAsync, 4000, 4000)                                       \
  X(MemcpyPeerAsync, 4000, 4000)                                   \
  X(MemsetD8Async, 3020, 3020)                                     \
  X(MemsetD16Async, 3020, 3020)                                    \
  X(MemsetD32Async, 3020, 3020)                                    \
  X(MemsetD2D32Async, 3020, 3020)                                  \
  X(PointerGetAttribute, 4000, 4000)                               \
  /* virtual memory (shareable), managed memory, batched copies */ \
  X(MemGetAllocationGranularity, 10020, 10020)                     \
  X(MemAddressReserve, 10020, 10020)                               \
  X(MemAddressFree, 10020, 10020)                                  \
  X(MemCreate, 10020, 10020)                                       \
  X(MemRelease, 10020, 10020)                                      \
  X(MemMap, 10020, 10020)                                          \
  X(MemUnmap, 10020, 10020)                                        \
  X(MemSetAccess, 10020, 10020)                                    \
  X(MemExportToShareableHandle, 10020, 10020)                      \
  X(MemImportFromShareableHandle, 10020, 10020)                    \
  X(MemAllocManaged, 6000, 6000)                                   \
  X(MemPrefetchAsync, 12020, 12020)                                \
  X(MemAdvise, 12020, 12020)                                       \
  X(MemcpyBatchAsync, 12080, 12080)                                \
  /* sharing memory pools and events between processes */          \
  X(MemPoolCreate, 11020, 11020)                                   \
  X(MemPoolDestroy, 11020, 11020)                                  \
  X(MemPoolExportToShareableHandle, 11020, 11020)                  \
  X(MemPoolImportFromShareableHandle, 11020, 11020)                \
  X(MemPoolExportPointer, 11020, 11020)                            \
  X(MemPoolImportPointer, 11020, 11020)                            \
  X(IpcGetEventHandle, 4010, 4010)                                 \
  X(IpcOpenEventHandle, 4010, 4010)                                \
  /* modules, libraries, functions */                              \
  X(ModuleLoadDataEx, 2010, 2010)                                  \
  X(ModuleUnload, 2000, 2000)                                      \
  X(ModuleGetFunction, 2000, 2000)                                 \
  X(ModuleGetFunctionCount, 12040, 12040)                          \
  X(ModuleEnumerateFunctions, 12040, 12040)                        \
  X(ModuleGetLoadingMode, 11070, 11070)                            \
  X(LibraryLoadData, 12000, 12000)                                 \
  X(LibraryUnload, 12000, 12000)                                   \
  X(LibraryGetKernel, 12000, 12000)                                \
  X(LibraryGetKernelCount, 12040, 12040)                           \
  X(LibraryEnumerateKernels, 12040, 12040)                         \
  X(KernelGetFunction, 12000, 12000)                               \
  X(KernelGetName, 12030, 12030)                                   \
  X(FuncGetName, 12030, 12030)                                     \
  X(FuncGetAttribute, 2020, 2020)                                  \
  X(FuncSetAttribute, 9000, 9000)                                  \
  X(FuncGetParamInfo, 12040, 12040)                                \
  /* launches and occupancy */                                     \
  X(LaunchKernel, 4000, 4000)                                      \
  X(LaunchKernelEx, 11060, 11060)                                  \
  X(OccupancyMaxActiveBlocksPerMultiprocessor, 6050, 6050)         \
  X(OccupancyMaxPotentialBlockSize, 6050, 6050)                    \
  X(OccupancyMaxActiveClusters, 11070, 11070)                      \
  X(OccupancyMaxPotentialClusterSize, 11070, 11070)                \
  /* capture and graphs */                                         \
  X(StreamBeginCapture, 10010, 10010)                              \
  X(StreamEndCapture, 10000, 10000)                                \
  X(StreamIsCapturing, 10000, 10000)                               \
  X(StreamGetCaptureInfo, 11030, 11030)                            \
  X(StreamUpdateCaptureDependencies, 11030, 11030)                 \
  X(ThreadExchangeStreamCaptureMode, 10010, 10010)                 \
  X(GraphCreate, 10000, 10000)                                     \
  X(GraphDestroy, 10000, 10000)                                    \
  X(GraphClone, 10000, 10000)                                      \
  X(GraphGetNodes, 10000, 10000)                                   \
  X(GraphNodeGetType, 10000, 10000)                                \
  X(GraphInstantiateWithFlags, 11040, 11040)                       \
  X(GraphInstantiateWithParams, 12000, 12000)                      \
  X(GraphExecDestroy, 10000, 10000)                                \
  X(GraphLaunch, 10000, 10000)                                     \
  X(GraphUpload, 11010, 11010)                                     \
  X(GraphExecUpdate, 12000, 12000)                                 \
  X(GraphKernelNodeGetParams, 12000, 12000)                        \
  X(GraphKernelNodeSetParams, 12000, 12000)                        \
  X(GraphExecKernelNodeSetParams, 12000, 12000)                    \
  X(GraphDebugDotPrint, 11030, 11030)                              \
  X(GraphAddKernelNode, 12000, 12000)                              \
  X(GraphAddMemcpyNode, 10000, 10000)                              \
  X(GraphAddMemsetNode, 10000, 10000)                              \
  X(GraphAddHostNode, 10000, 10000)                                \
  X(GraphAddEventRecordNode, 11010, 11010)                         \
  X(GraphAddEventWaitNode, 11010, 11010)                           \
  X(GraphAddChildGraphNode, 10000, 10000)                          \
  X(GraphAddEmptyNode, 10000, 10000)                               \
  X(GraphAddNode, 12020, 12020)                                    \
  X(GraphConditionalHandleCreate, 12030, 12030)                    \
  X(GraphDestroyNode, 10000, 10000)                                \
  X(GraphKernelNodeSetAttribute, 11000, 11000)                     \
  /* programmatic edges between kernel nodes (CUDA 12.3+) */       \
  X(GraphAddDependencies, 12030, 12030)                            \
  X(GraphGetEdges, 12030, 12030)
