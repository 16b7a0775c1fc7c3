# Include directories per target, so that the layering in docs/ARCHITECTURE.md is enforced by
# the compiler and not only by the link lines.
#
# Our headers are included with their folder, "pipeline/pipeline_engine.h". Exporting the
# project root would let any folder include any header. Instead every library exports a folder
# of its own under the build tree, build/include/<target>/, holding a link named after its
# source folder (build/include/deepnet_pipeline/pipeline -> pipeline/). A target therefore sees
# the headers of its own folder and of the libraries it links (PUBLIC include directories
# travel along link lines), and an include of any other folder fails to compile.

# deepnet_expose_headers(<target> <folder> [FILES <header>...]): <target> exports <folder>
# (relative to the project root) as "<folder>/...". With FILES only those headers of the folder
# are exported (model/'s torch-free part, deepnet_model_config). Tests and benchmarks use the
# same function for tests/ and bench/.
function(deepnet_expose_headers target folder)
  cmake_parse_arguments(ARG "" "" "FILES" ${ARGN})
  set(root ${PROJECT_BINARY_DIR}/include/${target})
  set(source ${PROJECT_SOURCE_DIR}/${folder})
  if(ARG_FILES)
    file(MAKE_DIRECTORY ${root}/${folder})
    foreach(header IN LISTS ARG_FILES)
      file(CREATE_LINK ${source}/${header} ${root}/${folder}/${header} SYMBOLIC)
    endforeach()
  else()
    get_filename_component(parent ${root}/${folder} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${source} ${root}/${folder} SYMBOLIC)
  endif()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "EXECUTABLE" OR type STREQUAL "MODULE_LIBRARY")
    target_include_directories(${target} PRIVATE ${root})
  elseif(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE ${root})
  else()
    target_include_directories(${target} PUBLIC ${root})
  endif()
endfunction()

# The four programs land in build/bin/ whatever folder defines them.
function(deepnet_install_program target)
  set_target_properties(${target} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bin)
endfunction()

# deepnet_write_link_table(<file>): writes one line per library and program of every folder the
# top-level CMakeLists.txt adds and of the folders those add in turn (coordinator/store/ ...;
# tests/ and bench/ excepted), "<target> <folder> <our targets it links directly,
# comma-separated>", for the layering test (tests/layering/), which holds it against the table in
# docs/ARCHITECTURE.md. INTERFACE targets (deepnet_grpcpp, deepnet_warnings, the umbrella
# deepnet_coordinator) are not rooms of their own.
function(deepnet_write_link_table file)
  get_property(queue DIRECTORY ${PROJECT_SOURCE_DIR} PROPERTY SUBDIRECTORIES)
  set(dirs)
  while(queue)
    list(POP_FRONT queue dir)
    list(APPEND dirs ${dir})
    get_property(children DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
    list(APPEND queue ${children})
  endwhile()
  set(ours)
  foreach(dir IN LISTS dirs)
    file(RELATIVE_PATH folder ${PROJECT_SOURCE_DIR} ${dir})
    if(folder MATCHES "^(tests|bench)(/|$)")
      continue()
    endif()
    get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
      get_target_property(type ${target} TYPE)
      if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|EXECUTABLE)$")
        list(APPEND ours ${target})
        set(folder_of_${target} ${folder})
      endif()
    endforeach()
  endforeach()
  set(text "")
  foreach(target IN LISTS ours)
    get_target_property(links ${target} LINK_LIBRARIES)
    set(deps)
    foreach(item IN LISTS links)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
      if(item IN_LIST ours AND NOT item IN_LIST deps)
        list(APPEND deps ${item})
      endif()
    endforeach()
    list(SORT deps)
    list(JOIN deps "," deps_text)
    string(APPEND text "${target} ${folder_of_${target}} ${deps_text}\n")
  endforeach()
  file(WRITE ${file} "${text}")
endfunction()
