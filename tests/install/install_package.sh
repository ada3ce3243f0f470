#!/usr/bin/env bash
# install_package.sh BUILD_DIR SOURCE_DIR WORK VERSION
# Installs the build into WORK/prefix, moves the tree (the install must be
# relocatable), and checks it from the outside: `ringtrain --version`, no build
# or source path in the installed text files, the launch script finding the
# installed binary, a ten-line program built with pkg-config only, and the
# perf layer left out of the package.
set -euo pipefail
build=$1; src=$2; work=$3; version=$4
rm -rf "$work"; mkdir -p "$work"
cmake --install "$build" --prefix "$work/staging" >"$work/install.log"
mv "$work/staging" "$work/prefix"
prefix=$work/prefix

for f in bin/ringtrain lib/libringtrain.a include/ringtrain/config.h include/ringtrain/model/layer.h \
         lib/cmake/ringtrain/ringtrainConfig.cmake lib/cmake/ringtrain/ringtrainTargets.cmake \
         lib/pkgconfig/ringtrain.pc share/ringtrain/launch/ringtrain-mpirun \
         share/ringtrain/launch/slurm/train.sbatch share/ringtrain/machinefiles/localhost; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done

# The scaling predictor (the perf layer) is the command's own: neither its
# headers nor its objects are in the package's library.
[ ! -e "$prefix/include/ringtrain/perf" ] || { echo "FAIL: include/ringtrain/perf installed"; exit 1; }
if ar t "$prefix/lib/libringtrain.a" | grep -Eq '^(link_fit|step_predictor|trace_profile|link_bench)\.cpp\.o$'; then
  echo "FAIL: libringtrain.a holds the perf layer"; exit 1
fi

got=$("$prefix/bin/ringtrain" --version)
[ "$got" = "ringtrain $version" ] || { echo "FAIL: --version says '$got', CMake says $version"; exit 1; }
echo "ringtrain --version: $got"

# Relocatable: nothing installed names the build, the source tree or the staging prefix.
if grep -rlE -e "$build" -e "$src" -e "$work/staging" "$prefix/lib/cmake" "$prefix/lib/pkgconfig" \
     "$prefix/include" "$prefix/share"; then
  echo "FAIL: the files above name a build-time path"; exit 1
fi

# The launch script finds the binary beside it in the installed tree.
out=$(env -u BUILD_DIR -u RINGTRAIN_EXE "$prefix/share/ringtrain/launch/ringtrain-mpirun" -n 1 --dry-run info 2>&1 || true)
if ! printf '%s\n' "$out" | grep -q "$prefix/bin/ringtrain"; then
  printf '%s\n' "$out"; echo "FAIL: ringtrain-mpirun does not run the installed binary"; exit 1
fi

# pkg-config: a ten-line program compiles, links and runs.
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046  # pkg-config's output is a list of flags
c++ -o "$work/hello" "$src/tests/install/pkgconfig_hello.cpp" $(pkg-config --cflags --libs ringtrain)
hello=$("$work/hello")
echo "pkg-config program: $hello"
case $hello in "ringtrain $version: 4 layers"*) ;; *) echo "FAIL: unexpected output"; exit 1 ;; esac
echo "PASS"
