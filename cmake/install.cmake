# `cmake --install build --prefix P`: the library, its public headers, the
# `ringtrain` executable, the launch scripts and machinefile examples, a CMake
# package (find_package(ringtrain CONFIG) -> ringtrain::ringtrain) and a
# pkg-config file. Every path in the installed files is relative to the file
# itself, so the tree may be moved after installing.
include(CMakePackageConfigHelpers)

set(RINGTRAIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ringtrain)

install(TARGETS ringtrain ringtrain_cli EXPORT ringtrainTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The perf layer's headers belong to the command-line tool's own library, which
# is not installed.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/ringtrain DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        PATTERN perf EXCLUDE)
install(FILES ${CMAKE_BINARY_DIR}/generated/ringtrain/config.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ringtrain)

# Launch scripts keep their layout (ringtrain-mpirun sources env.sh beside it)
# and find the installed binary in <prefix>/bin.
set(RINGTRAIN_SHARE_DIR ${CMAKE_INSTALL_DATADIR}/ringtrain)
install(PROGRAMS ${CMAKE_SOURCE_DIR}/launch/ringtrain-mpirun ${CMAKE_SOURCE_DIR}/launch/env.sh
        DESTINATION ${RINGTRAIN_SHARE_DIR}/launch)
install(FILES ${CMAKE_SOURCE_DIR}/launch/slurm/train.sbatch
        DESTINATION ${RINGTRAIN_SHARE_DIR}/launch/slurm)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/machinefiles/ DESTINATION ${RINGTRAIN_SHARE_DIR}/machinefiles)

install(EXPORT ringtrainTargets NAMESPACE ringtrain:: DESTINATION ${RINGTRAIN_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/ringtrainConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/generated/ringtrainConfig.cmake
                              INSTALL_DESTINATION ${RINGTRAIN_CMAKE_DIR})
# 0.x: a plugin or program built against one minor version is not promised to
# work with another (the plugin loader checks the exact version anyway).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/generated/ringtrainConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/generated/ringtrainConfig.cmake
              ${CMAKE_BINARY_DIR}/generated/ringtrainConfigVersion.cmake
        DESTINATION ${RINGTRAIN_CMAKE_DIR})

# pkg-config: the static library needs its dependencies on the link line, so
# they are Requires (not .private), found through their own .pc files.
if(MPI_C_LIBRARIES MATCHES "openmpi|ompi")
  set(_rt_pc_mpi ompi-c)
else()
  set(_rt_pc_mpi mpich)
endif()
set(RINGTRAIN_PC_REQUIRES "fmt, nlohmann_json, ${_rt_pc_mpi}, hdf5, openblas, zlib")
set(RINGTRAIN_PC_LIBS "${CMAKE_DL_LIBS}")
if(RINGTRAIN_PC_LIBS)
  set(RINGTRAIN_PC_LIBS "-l${RINGTRAIN_PC_LIBS}")
endif()
string(APPEND RINGTRAIN_PC_LIBS " -lmvec")  # glibc's vector math (the activations' expf)
if(RINGTRAIN_ONEDNN)
  string(APPEND RINGTRAIN_PC_LIBS " -ldnnl -lgomp")
endif()
if(RINGTRAIN_CUDA)
  get_filename_component(_rt_cudnn_dir ${CUDNN_LIBRARY} DIRECTORY)
  get_filename_component(_rt_nccl_dir ${NCCL_LIBRARY} DIRECTORY)
  string(APPEND RINGTRAIN_PC_LIBS " -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static -lcublas -lcublasLt -lnvrtc"
         " -L${_rt_cudnn_dir} -L${_rt_nccl_dir} -lcudnn -lnccl -lrt")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/ringtrain.pc.in ${CMAKE_BINARY_DIR}/generated/ringtrain.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/generated/ringtrain.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
