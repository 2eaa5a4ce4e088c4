# cmake -DLIBRARY=libeps_device_hip.so -DOBJCOPY=objcopy -DBUNDLER=clang-offload-bundler
#       -DREADELF=llvm-readelf -DARCHS=gfx90a -DKERNELS=a,b -DWORK_DIR=dir -P this
#
# Checks that a HIP binary (the plugin, a shared library; an object works too) carries a code object for
# every architecture in ARCHS with every named kernel: its .hip_fatbin section is a clang offload bundle
# (or several, each aligned, when objects were linked together: only the first is read); for each arch its
# hipv4-amdgcn-amd-amdhsa--<arch> entry is unbundled, its HSA metadata must name the target and its
# symbol table must hold a kernel descriptor (<mangled name>.kd) for each kernel.
cmake_minimum_required(VERSION 3.25)

foreach(var LIBRARY OBJCOPY BUNDLER READELF ARCHS KERNELS WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_code_object: -D${var}= is required")
  endif()
endforeach()

get_filename_component(LIBRARY "${LIBRARY}" ABSOLUTE)
if(NOT EXISTS "${LIBRARY}")
  message(FATAL_ERROR "check_code_object: ${LIBRARY} does not exist")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
get_filename_component(name "${LIBRARY}" NAME)
set(bundle ${WORK_DIR}/${name}.bundle)

string(REPLACE "," ";" archs "${ARCHS}")
string(REPLACE "," ";" kernels "${KERNELS}")
execute_process(COMMAND ${OBJCOPY} -O binary --only-section=.hip_fatbin ${LIBRARY} ${bundle}
                RESULT_VARIABLE rc ERROR_VARIABLE error)
if(NOT rc EQUAL 0 OR NOT EXISTS ${bundle})
  message(FATAL_ERROR "check_code_object: ${LIBRARY}: cannot extract .hip_fatbin: ${error}")
endif()
file(SIZE ${bundle} bundle_size)
if(bundle_size EQUAL 0)
  message(FATAL_ERROR
    "check_code_object: ${LIBRARY} holds no HIP code object (.hip_fatbin is empty or absent)")
endif()
execute_process(COMMAND ${BUNDLER} --list --type=o --input=${bundle}
                RESULT_VARIABLE rc OUTPUT_VARIABLE entries ERROR_VARIABLE error)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_code_object: ${LIBRARY}: .hip_fatbin is not an offload bundle: ${error}")
endif()
foreach(arch IN LISTS archs)
  set(target hipv4-amdgcn-amd-amdhsa--${arch})
  string(FIND "${entries}" "${target}" where)
  if(where EQUAL -1)
    message(FATAL_ERROR "check_code_object: ${LIBRARY}: no ${target} in the bundle:\n${entries}")
  endif()
  set(code_object ${WORK_DIR}/${name}.${arch}.co)
  execute_process(COMMAND ${BUNDLER} --unbundle --type=o --targets=${target} --input=${bundle}
                          --output=${code_object} RESULT_VARIABLE rc ERROR_VARIABLE error)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_code_object: ${LIBRARY}: cannot unbundle ${target}: ${error}")
  endif()
  execute_process(COMMAND ${READELF} --notes --syms ${code_object} RESULT_VARIABLE rc OUTPUT_VARIABLE dump
                  ERROR_VARIABLE error)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_code_object: ${code_object}: ${READELF} failed: ${error}")
  endif()
  if(NOT dump MATCHES "amdhsa.target: +'?amdgcn-amd-amdhsa--${arch}")
    message(FATAL_ERROR "check_code_object: ${code_object}: HSA metadata does not name ${arch}")
  endif()
  foreach(kernel IN LISTS kernels)
    if(NOT dump MATCHES "${kernel}[A-Za-z0-9_]*\\.kd")
      message(FATAL_ERROR "check_code_object: ${code_object}: no kernel descriptor for ${kernel}")
    endif()
  endforeach()
endforeach()
message(STATUS "check_code_object: ${LIBRARY}: code objects for ${ARCHS} with ${KERNELS}")
