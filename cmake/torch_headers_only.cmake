# The CUDA compile check's stand-in for find_package(Torch) (scripts/cuda_compile_check.sh,
# docs/OPERATIONS.md "LibTorch versions"). With -DDEEPNET_TORCH_HEADERS_ONLY=<prefix>/usr/include
# (LibTorch 2.x CUDA headers, no libraries: Debian trixie's libtorch-cuda-dev) the build tree
# only compiles: `torch` is an INTERFACE target carrying the headers, LibTorch's compile
# definitions and the CUDA toolkit's include directory, CUDA and NCCL code paths are on, and the
# custom target deepnet_cuda_check builds the object files of every target that reaches LibTorch
# (libraries, programs, tests, benchmarks; found from the link lines, see
# deepnet_write_cuda_check_objects below), nothing is linked. A normal configure never reads this
# file.
set(root ${DEEPNET_TORCH_HEADERS_ONLY})
set(version_h ${root}/torch/csrc/api/include/torch/version.h)
if(NOT EXISTS ${version_h})
  message(FATAL_ERROR "DEEPNET_TORCH_HEADERS_ONLY=${root} holds no LibTorch headers "
                      "(no ${version_h}); run scripts/fetch_torch_cuda_headers.sh")
endif()
file(STRINGS ${version_h} version_lines REGEX "#define TORCH_VERSION_(MAJOR|MINOR|PATCH) ")
set(Torch_VERSION "")
foreach(part MAJOR MINOR PATCH)
  string(REGEX MATCH "TORCH_VERSION_${part} ([0-9]+)" _ "${version_lines}")
  list(APPEND Torch_VERSION ${CMAKE_MATCH_1})
endforeach()
list(JOIN Torch_VERSION "." Torch_VERSION)

# nvcc, the CUDA headers, cuBLAS/NCCL next to them (CUDA 13 at /usr/local/cuda here).
if(NOT CUDAToolkit_ROOT AND NOT DEFINED ENV{CUDAToolkit_ROOT} AND EXISTS /usr/local/cuda)
  set(CUDAToolkit_ROOT /usr/local/cuda)
endif()
find_package(CUDAToolkit REQUIRED)
# .cu files anywhere in the project are compiled by nvcc (one architecture is enough to check).
if(NOT CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 90)
endif()
if(NOT CMAKE_CUDA_COMPILER)
  set(CMAKE_CUDA_COMPILER ${CUDAToolkit_NVCC_EXECUTABLE})
endif()
enable_language(CUDA)
if(DEEPNET_CCACHE AND NOT CMAKE_CUDA_COMPILER_LAUNCHER)
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CMAKE_CXX_COMPILER_LAUNCHER})
endif()

# add_dependencies() in this project only orders programs that tests run before those tests; in a
# tree that compiles without linking it would pull whole programs (and every torch-free library
# they link) into deepnet_cuda_check, so here it does nothing. Generated headers are sources or
# custom commands, which order the compilations that need them.
function(add_dependencies)
endfunction()

# Unity builds: each target's sources are compiled 16 at a time as one translation unit, so
# LibTorch's headers are parsed once per batch instead of once per file (a third of the CPU time
# of one unit per file: docs/PERFORMANCE.md "CUDA compile check"). The normal LibTorch 1.13 build
# still compiles every file alone, which catches a file that leans on another's includes.
set(CMAKE_UNITY_BUILD ON)
set(CMAKE_UNITY_BUILD_BATCH_SIZE 16)

set(TORCH_INCLUDE_DIRS ${root}/torch/csrc/api/include ${root})
add_library(torch INTERFACE IMPORTED)
set_target_properties(torch PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${TORCH_INCLUDE_DIRS};${CUDAToolkit_INCLUDE_DIRS}"
  # What Caffe2Targets.cmake gives torch_cpu and torch_cuda, and TorchConfig.cmake's flags.
  INTERFACE_COMPILE_DEFINITIONS "USE_DISTRIBUTED;USE_C10D_GLOO;USE_RPC;USE_TENSORPIPE;USE_C10D_NCCL"
  INTERFACE_COMPILE_OPTIONS "-D_GLIBCXX_USE_CXX11_ABI=1")
set(TORCH_LIBRARIES torch)
set(Torch_FOUND ON)
set(DEEPNET_WITH_CUDA ON CACHE STRING "Build CUDA/NCCL code paths: AUTO, ON or OFF" FORCE)
message(STATUS "DeepNet compile check: LibTorch ${Torch_VERSION} headers from ${root}, "
               "CUDA ${CUDAToolkit_VERSION}")

# deepnet_write_cuda_check_objects(<file>): every library and executable of the project whose link
# closure reaches LibTorch gets its object files into the custom target deepnet_cuda_check, and
# their build-tree paths into <file> (for the include checks of scripts/cuda_compile_check.sh).
function(_deepnet_collect_targets dir out_var)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _deepnet_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out_var} ${targets} PARENT_SCOPE)
endfunction()

# _deepnet_reaches_torch: cmake/torch_free.cmake.
function(deepnet_write_cuda_check_objects file)
  _deepnet_collect_targets(${PROJECT_SOURCE_DIR} targets)
  set(objects)
  set(names)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    _deepnet_reaches_torch(${target} reaches)
    if(reaches)
      list(APPEND objects "$<TARGET_OBJECTS:${target}>")
      list(APPEND lines "$<JOIN:$<TARGET_OBJECTS:${target}>,\n>")
      list(APPEND names ${target})
    endif()
  endforeach()
  list(LENGTH names count)
  message(STATUS "DeepNet compile check: ${count} targets reach LibTorch")
  add_custom_target(deepnet_cuda_check DEPENDS ${objects})
  list(JOIN lines "\n" lines)
  file(GENERATE OUTPUT ${file} CONTENT "${lines}\n")
endfunction()
