# Route compilations through ccache when it is installed. The sloppiness settings let ccache
# cache translation units that use the LibTorch precompiled header.
find_program(DEEPNET_CCACHE ccache)
if(DEEPNET_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER
      ${CMAKE_COMMAND} -E env
      "CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime"
      # Relative paths in the cache key: a fresh clone elsewhere (CI) reuses the cache.
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" "CCACHE_NOHASHDIR=1"
      ${DEEPNET_CCACHE})
  message(STATUS "ccache: ${DEEPNET_CCACHE}")
endif()
