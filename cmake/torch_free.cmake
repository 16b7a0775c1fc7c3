# deepnet_require_torch_free(<target>): fails the configure when <target> links LibTorch or one of
# our LibTorch targets, directly or through any dependency, or when LibTorch's include
# directories reach its compile line. The check runs once every CMakeLists.txt has been read
# (cmake_language(DEFER) at the top level), so a dependency added anywhere later is seen too.
# Used for every library that the control plane and the worker daemon are built from (storage,
# job, worker, coordinator, ctl), which must build and run on machines without LibTorch.

# Link items that mean LibTorch: its CMake targets, the libraries of TORCH_LIBRARIES, and our
# targets that link it.
function(_deepnet_is_torch_item item out_var)
  set(result OFF)
  set(names "deepnet_model|deepnet_profiling|deepnet_comm|deepnet_checkpoint|deepnet_pipeline|deepnet_train|deepnet_cli|torch|torch_cpu|torch_cuda|torch_library|c10|c10_cuda")
  if(item MATCHES "^(${names}|caffe2::.*|Caffe2::.*)$")
    set(result ON)
  elseif(item MATCHES "(^|/)lib(torch|torch_cpu|torch_cuda|c10|c10_cuda)\\.(so|a)")
    set(result ON)
  elseif(NOT item STREQUAL "" AND item IN_LIST TORCH_LIBRARIES)
    set(result ON)
  endif()
  set(${out_var} ${result} PARENT_SCOPE)
endfunction()

# Every link item <target> reaches, itself included: LINK_LIBRARIES and INTERFACE_LINK_LIBRARIES
# of targets, followed through aliases; items that mean LibTorch are listed but not followed.
# Shared by the torch-free check below and the CUDA compile check (cmake/torch_headers_only.cmake).
function(_deepnet_link_closure target out_var)
  set(queue ${target})
  set(seen)
  while(queue)
    list(POP_FRONT queue item)
    # $<LINK_ONLY:x> (a static library's private dependency) still links x.
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(item STREQUAL "" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${item})
    _deepnet_is_torch_item("${item}" is_torch)
    if(is_torch OR NOT TARGET ${item})
      continue()
    endif()
    get_target_property(aliased ${item} ALIASED_TARGET)
    if(aliased)
      list(APPEND queue ${aliased})
      continue()
    endif()
    foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(values ${item} ${property})
      if(values)
        list(APPEND queue ${values})
      endif()
    endforeach()
  endwhile()
  set(${out_var} ${seen} PARENT_SCOPE)
endfunction()

# Whether <target> links LibTorch, directly or through any dependency.
function(_deepnet_reaches_torch target out_var)
  _deepnet_link_closure(${target} items)
  set(result OFF)
  foreach(item IN LISTS items)
    _deepnet_is_torch_item("${item}" is_torch)
    if(is_torch)
      set(result ON)
      break()
    endif()
  endforeach()
  set(${out_var} ${result} PARENT_SCOPE)
endfunction()

function(_deepnet_check_torch_free target)
  # LibTorch's own include directories, less the compiler's default ones (/usr/include on
  # Debian, where LibTorch lives beside everything else).
  set(torch_dirs)
  foreach(dir IN LISTS TORCH_INCLUDE_DIRS)
    if(NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES AND NOT dir STREQUAL "/usr/include")
      list(APPEND torch_dirs ${dir})
    endif()
  endforeach()

  _deepnet_link_closure(${target} items)
  set(problems)
  foreach(item IN LISTS items)
    _deepnet_is_torch_item("${item}" is_torch)
    if(is_torch)
      list(APPEND problems "links ${item}")
      continue()
    endif()
    if(NOT TARGET ${item})
      continue()
    endif()
    foreach(property INCLUDE_DIRECTORIES INTERFACE_INCLUDE_DIRECTORIES
                     INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
      get_target_property(values ${item} ${property})
      if(NOT values)
        continue()
      endif()
      foreach(dir IN LISTS torch_dirs)
        string(FIND "${values}" "${dir}" at)
        if(NOT at EQUAL -1)
          list(APPEND problems "${item} has LibTorch's include directory ${dir}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  if(problems)
    list(REMOVE_DUPLICATES problems)
    string(REPLACE ";" "\n  " problems "${problems}")
    message(FATAL_ERROR "${target} must not depend on LibTorch, but:\n  ${problems}")
  endif()
  message(STATUS "DeepNet: ${target} is LibTorch-free")
endfunction()

function(deepnet_require_torch_free target)
  # Deferred arguments are expanded when the call runs, so bake the target's name in now.
  cmake_language(EVAL CODE "cmake_language(DEFER DIRECTORY [[${PROJECT_SOURCE_DIR}]]
                            CALL _deepnet_check_torch_free [[${target}]])")
endfunction()
