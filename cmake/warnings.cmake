# Warnings for our own code only; third-party headers come in as system includes.
add_library(deepnet_warnings INTERFACE)
# C++ only: nvcc (.cu files, e.g. in the CUDA compile check) rejects these host flags.
target_compile_options(deepnet_warnings INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wnon-virtual-dtor;-Wno-unused-parameter;-Werror=return-type>")

# One precompiled header for every target that includes LibTorch: a translation unit that
# includes torch/torch.h takes about 20 s to parse here, the PCH brings that to a few seconds.
function(deepnet_use_torch_pch target)
  if(TARGET deepnet_model AND NOT target STREQUAL "deepnet_model")
    target_precompile_headers(${target} REUSE_FROM deepnet_model)
  else()
    target_precompile_headers(${target} PRIVATE <torch/torch.h>)
  endif()
endfunction()
