// Export macro of the extern "C" kernel launchers (the libraries are built with -fvisibility=hidden).
#pragma once

#ifndef TORCHTRT_EXT_API
#if defined(_WIN32)
#define TORCHTRT_EXT_API __declspec(dllexport)
#else
#define TORCHTRT_EXT_API __attribute__((visibility("default")))
#endif
#endif
