# Decide whether CUDA/NCCL code paths are compiled. LibTorch's config sets CUDA_FOUND / uses
# the caffe2::cuda target when it was built with CUDA.
set(DEEPNET_HAVE_CUDA OFF)
if(DEEPNET_WITH_CUDA STREQUAL "AUTO")
  if(TARGET torch_cuda OR CUDA_FOUND OR CUDAToolkit_FOUND)
    set(DEEPNET_HAVE_CUDA ON)
  endif()
elseif(DEEPNET_WITH_CUDA)
  if(NOT (TARGET torch_cuda OR CUDA_FOUND OR CUDAToolkit_FOUND))
    message(FATAL_ERROR "DEEPNET_WITH_CUDA=ON but the LibTorch found has no CUDA")
  endif()
  set(DEEPNET_HAVE_CUDA ON)
endif()
# Sources guard CUDA-only API calls (c10/cuda, ATen/cuda) on this macro.
if(DEEPNET_HAVE_CUDA)
  add_compile_definitions(DEEPNET_HAVE_CUDA)
endif()
message(STATUS "DeepNet CUDA/NCCL code paths: ${DEEPNET_HAVE_CUDA}")
