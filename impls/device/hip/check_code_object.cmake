# cmake -DLIBRARY=libeps_device_hip.a -DAR=ar -DOBJCOPY=objcopy -DBUNDLER=clang-offload-bundler
#       -DREADELF=llvm-readelf -DARCHS=gfx90a -DKERNELS=a,b -DWORK_DIR=dir -P this
#
# Checks that a HIP static library carries a code object for every architecture in ARCHS with every named
# kernel: the .hip_fatbin section of each object is a clang offload bundle; for each arch its
# hipv4-amdgcn-amd-amdhsa--<arch> entry is unbundled, its HSA metadata must name the target and its
# symbol table must hold a kernel descriptor (<mangled name>.kd) for each kernel.
cmake_minimum_required(VERSION 3.25)

foreach(var LIBRARY AR OBJCOPY BUNDLER READELF ARCHS KERNELS WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_code_object: -D${var}= is required")
  endif()
endforeach()

get_filename_component(LIBRARY "${LIBRARY}" ABSOLUTE)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${AR} x ${LIBRARY} WORKING_DIRECTORY ${WORK_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "check_code_object: cannot extract ${LIBRARY}")
endif()
file(GLOB objects ${WORK_DIR}/*.o)

string(REPLACE "," ";" archs "${ARCHS}")
string(REPLACE "," ";" kernels "${KERNELS}")
set(checked "")
foreach(object IN LISTS objects)
  execute_process(COMMAND ${OBJCOPY} -O binary --only-section=.hip_fatbin ${object} ${object}.bundle
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0 OR NOT EXISTS ${object}.bundle)
    continue()
  endif()
  file(SIZE ${object}.bundle bundle_size)
  if(bundle_size EQUAL 0)
    continue()
  endif()
  execute_process(COMMAND ${BUNDLER} --list --type=o --input=${object}.bundle
                  RESULT_VARIABLE rc OUTPUT_VARIABLE entries ERROR_VARIABLE error)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "check_code_object: ${object}: not an offload bundle: ${error}")
  endif()
  foreach(arch IN LISTS archs)
    set(target hipv4-amdgcn-amd-amdhsa--${arch})
    string(FIND "${entries}" "${target}" where)
    if(where EQUAL -1)
      message(FATAL_ERROR "check_code_object: ${object}: no ${target} in the bundle:\n${entries}")
    endif()
    set(code_object ${object}.${arch}.co)
    execute_process(COMMAND ${BUNDLER} --unbundle --type=o --targets=${target} --input=${object}.bundle
                            --output=${code_object} RESULT_VARIABLE rc ERROR_VARIABLE error)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "check_code_object: ${object}: cannot unbundle ${target}: ${error}")
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
    list(APPEND checked ${arch})
  endforeach()
endforeach()

foreach(arch IN LISTS archs)
  if(NOT arch IN_LIST checked)
    message(FATAL_ERROR "check_code_object: ${LIBRARY} holds no HIP code object")
  endif()
endforeach()
message(STATUS "check_code_object: ${LIBRARY}: code objects for ${ARCHS} with ${KERNELS}")
