/* Builds the simulated runtime and the scenarios as a CUDA runtime instead: the same
 * behaviour under libcudart's names (per-thread variants are _ptsz there). */
#define hipInit cudaSimInit
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipStreamCreate cudaStreamCreate
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamCreateWithPriority cudaStreamCreateWithPriority
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamSynchronize_spt cudaStreamSynchronize_ptsz
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipStreamWaitEvent_spt cudaStreamWaitEvent_ptsz
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventRecord cudaEventRecord
#define hipEventRecord_spt cudaEventRecord_ptsz
#define hipEventRecordWithFlags cudaEventRecordWithFlags
#define hipEventSynchronize cudaEventSynchronize
#define hipEventQuery cudaEventQuery
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipSimLaunch cudaSimLaunch
#define hipSimGate cudaSimGate
#define hipLaunchKernel cudaLaunchKernel
#define hipMemcpyAsync cudaMemcpyAsync
