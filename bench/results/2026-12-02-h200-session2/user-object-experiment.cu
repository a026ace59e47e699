// Experiment: does a user object retained by a graph cost per replay / instantiate?
#include <cuda.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
__global__ void empty_kernel() {}
#define CK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s; cuGetErrorName(r_, &s); std::printf("%s failed: %s line %d\n", #x, s, __LINE__); std::exit(1);} } while (0)
static void CUDA_CB destroy_cb(void*) {}
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
CUgraph make(CUfunction f, CUstream s, int n, bool user_object, bool event_wait_first, CUevent ev) {
  CUgraph g;
  if (event_wait_first) { CK(cuEventRecord(ev, s)); }
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (int i = 0; i < n; ++i) CK(cuLaunchKernel(f, 1,1,1,1,1,1,0,s,nullptr,nullptr));
  CK(cuStreamEndCapture(s, &g));
  if (user_object) {
    CUuserObject o; CK(cuUserObjectCreate(&o, nullptr, destroy_cb, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CK(cuGraphRetainUserObject(g, o, 1, CU_GRAPH_USER_OBJECT_MOVE));
  }
  return g;
}
int main() {
  CK(cuInit(0)); CUdevice d; CK(cuDeviceGet(&d, 0)); CUcontext c; CK(cuDevicePrimaryCtxRetain(&c, d)); CK(cuCtxSetCurrent(c));
  CUfunction f; cudaFuncGetAttributes(nullptr, nullptr); // force runtime init of module
  cudaFree(0);
  cudaGetFuncBySymbol((cudaFunction_t*)&f, (const void*)empty_kernel);
  CUstream s; CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent ev; CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  for (int n : {10, 100, 1000}) {
    CUgraph g0 = make(f, s, n, false, false, ev), g1 = make(f, s, n, true, false, ev);
    CUgraphExec e0, e1; CK(cuGraphInstantiateWithFlags(&e0, g0, 0)); CK(cuGraphInstantiateWithFlags(&e1, g1, 0));
    int reps = n >= 1000 ? 20 : n >= 100 ? 100 : 400;
    std::vector<double> a, b;
    for (int round = 0; round < 15; ++round) {
      for (int k = 0; k < 2; ++k) {
        CUgraphExec e = k ? e1 : e0;
        CK(cuGraphLaunch(e, s)); CK(cuStreamSynchronize(s));
        double t = now();
        for (int i = 0; i < reps; ++i) CK(cuGraphLaunch(e, s));
        CK(cuStreamSynchronize(s));
        (k ? b : a).push_back((now() - t) / reps / n * 1e6);
      }
    }
    std::sort(a.begin(), a.end()); std::sort(b.begin(), b.end());
    std::printf("replay n=%4d per node: plain %.3f us, user object %.3f us, ratio %.3f\n", n, a[7], b[7], b[7] / a[7]);
    std::vector<double> ia, ib;
    if (n == 1000) {
      for (int round = 0; round < 9; ++round) for (int k = 0; k < 2; ++k) {
        CUgraphExec e; double t = now(); CK(cuGraphInstantiateWithFlags(&e, k ? g1 : g0, 0)); CK(cuGraphExecDestroy(e));
        (k ? ib : ia).push_back((now() - t) * 1e3);
      }
      std::sort(ia.begin(), ia.end()); std::sort(ib.begin(), ib.end());
      std::printf("instantiate+destroy n=1000: plain %.3f ms, user object %.3f ms, ratio %.3f\n", ia[4], ib[4], ib[4] / ia[4]);
      std::vector<double> ic, id;
      for (int round = 0; round < 9; ++round) for (int k = 0; k < 2; ++k) {
        CUgraphExec e; double t = now();
        if (k) { CUDA_GRAPH_INSTANTIATE_PARAMS p{}; CK(cuGraphInstantiateWithParams(&e, g0, &p)); }
        else CK(cuGraphInstantiateWithFlags(&e, g0, 0));
        CK(cuGraphExecDestroy(e));
        (k ? id : ic).push_back((now() - t) * 1e3);
      }
      std::sort(ic.begin(), ic.end()); std::sort(id.begin(), id.end());
      std::printf("instantiate+destroy n=1000: WithFlags %.3f ms, WithParams %.3f ms, ratio %.3f\n", ic[4], id[4], id[4] / ic[4]);
    }
    CK(cuGraphExecDestroy(e0)); CK(cuGraphExecDestroy(e1)); CK(cuGraphDestroy(g0)); CK(cuGraphDestroy(g1));
  }
  std::printf("done\n");
}
