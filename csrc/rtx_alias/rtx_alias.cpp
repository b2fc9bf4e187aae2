// libtorchtrt_ext_rtx_alias.so: no code, only two dynamic-section entries that make the unversioned name
// "libtensorrt_rtx.so" resolve to the libtensorrt_rtx.so.1 a Python process has already loaded.
//
// TensorRT-RTX's ONNX parser, on its first plugin node, calls dlopen("libtensorrt_rtx.so") and then
// dlsym(handle, "getPrivateApi_INTERNAL"). The pip wheel ships only libtensorrt_rtx.so.1, so that dlopen fails and
// the parser ends the process (std::terminate). setup.py links this file with
//   SONAME  libtensorrt_rtx.so    glibc's dlopen of that bare name returns an already loaded object with this
//                                 SONAME, whatever its file name or folder;
//   NEEDED  libtensorrt_rtx.so.1  resolved to the already loaded wheel library (matched by its SONAME), so dlsym
//                                 through this library's handle finds the real entry point, in the same instance.
// torchtrt_ext.backend.rtx_alias loads it after tensorrt_rtx is imported and checks both entries' effect.
