# `epsuite info` on a node without a usable GPU (EPS_DEVICE_PLUGIN_DIR names a directory without plugins):
# exit 0; "#  gpus" gives the reason of cuda and of hip, "#  gpudirect" says why not; the JSON has the same
# note, an empty gpu_devices and the gpudirect line. Run: cmake -DEPSUITE=path/to/epsuite -P this file.
execute_process(COMMAND ${EPSUITE} info RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "epsuite info exited ${rc}:\n${out}\n${err}")
endif()
set(gpus_line "#  gpus +none: cuda: libeps_device_cuda\\.so cannot be loaded: [^\n]+; hip: libeps_device_hip\\.so cannot be loaded: [^\n]+\n")
if(NOT out MATCHES "${gpus_line}")
  message(FATAL_ERROR "no gpus line with the reason of each backend in:\n${out}")
endif()
if(NOT out MATCHES "\n#  gpudirect +not possible: no GPU\n")
  message(FATAL_ERROR "no gpudirect line in:\n${out}")
endif()

execute_process(COMMAND ${EPSUITE} info --json - RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "epsuite info --json - exited ${rc}:\n${json}\n${err}")
endif()
string(JSON note GET "${json}" platform gpu_note)
string(JSON devices LENGTH "${json}" platform gpu_devices)
string(JSON gpudirect GET "${json}" platform gpudirect)
string(JSON gpus LENGTH "${json}" platform gpus)
if(NOT note MATCHES "^none: cuda: .+; hip: .+" OR NOT devices EQUAL 0 OR NOT gpus EQUAL 0
   OR NOT gpudirect STREQUAL "not possible: no GPU")
  message(FATAL_ERROR "platform JSON: gpu_note '${note}', ${gpus} gpus, ${devices} gpu_devices, gpudirect '${gpudirect}'")
endif()
