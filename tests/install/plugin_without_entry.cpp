// A shared library that is not a ringtrain plugin: it exports neither entry
// symbol (the loader must say so, naming the file).
extern "C" int not_a_ringtrain_plugin() {
  return 1;
}
