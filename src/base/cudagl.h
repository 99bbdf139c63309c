/* OpenGL interop's entry points (cudaGL.h, whose GL types are unsigned
   ints), declared here so that no GL header is needed to build: the
   binding's driver table and the software driver use them. */
#ifndef CUGRAPH_CUDAGL_H
#define CUGRAPH_CUDAGL_H

#include <cuda.h>

CUresult CUDAAPI cuGraphicsGLRegisterBuffer(CUgraphicsResource *res,
                                            unsigned int buffer,
                                            unsigned int flags);
CUresult CUDAAPI cuGraphicsGLRegisterImage(CUgraphicsResource *res,
                                           unsigned int image,
                                           unsigned int target,
                                           unsigned int flags);

#endif
