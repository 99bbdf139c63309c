/* render: an engine that drives each frame from C with a graph written in
   Lua, reloads the graph's kernel while it runs, and draws the particles
   with OpenGL from the very memory CUDA computes them in.

   - OpenGL runs headless: an EGL display on the CUDA device (EGL_EXT
     device platform), a pbuffer context and an offscreen framebuffer.
     libEGL (and libOpenGL or libGL) are opened with dlopen; nothing links
     against them or against libcuda.
   - The script (render.lua) compiles KERNEL (a file the engine writes),
     captures one simulation step into a graph and returns it with its dt
     scalar; the engine takes C handles (cugraph_tograph,
     cugraph_toscalar) and launches the graph itself every frame.
   - At frame 101 the engine rewrites KERNEL (each step then counts 1000
     ticks instead of 1, and the swirl changes); the script's poll() sees
     it and reloads: the engine's C graph switches to the new code without
     a new capture. At frame 201 it writes a broken kernel: the reload
     fails, is reported, and the old code keeps running.
   - Every 100 frames the script copies the particles into the engine's GL
     vertex buffer inside a map scope (device to device), the engine draws
     them as points into the framebuffer and reads back only the image, to
     write OUT/frame_NNN.png.
   - Then the script stamps a 16 x 16 magenta mark into the framebuffer's
     renderbuffer, which it registered as a GL image (cuda.gl_image) and
     maps as an Array, copying a buffer into its first rows; the engine
     checks the mark in the image it reads back.
   - The checks: ticks = 100 + 200 * 1000, one reload and one failed
     reload, the images not blank; then lua_close, one more launch of the
     C graph (its pins outlive the state), and the release.

     render OUT_DIR [lua_dir [png_dir]]                   exits 0 when all pass */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cuda.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"

#ifndef CUGRAPH_LUA_DIR
#define CUGRAPH_LUA_DIR "lua"
#endif
#ifndef RENDER_SCRIPT
#define RENDER_SCRIPT "examples/embed/render.lua"
#endif
#ifndef PNG_DIR
#define PNG_DIR "build/examples"
#endif

enum { N = 1 << 18, W = 512, H = 512, FRAMES = 300, MARK = 16 };

/* -- the driver ------------------------------------------------------------ */

#define CU_FUNCS(X) \
  X(cuInit) X(cuDeviceGet) X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) X(cuCtxSetCurrent) X(cuStreamCreate) \
  X(cuStreamDestroy) X(cuStreamSynchronize)
#define FIELD(f) __typeof__(f) *f;
static struct { CU_FUNCS(FIELD) } cu;
#undef FIELD
#define STR(x) #x
#define XSTR(x) STR(x)

/* -- EGL and GL, declared here: no headers needed ------------------------- */

typedef void *EGLDisplay, *EGLConfig, *EGLSurface, *EGLContext, *EGLDeviceEXT;
typedef int EGLint;
typedef unsigned GLenum, GLuint, GLbitfield;
typedef int GLint, GLsizei;
typedef float GLfloat;
typedef double GLdouble;
typedef ptrdiff_t GLsizeiptr;

#define EGL_NONE 0x3038
#define EGL_SURFACE_TYPE 0x3033
#define EGL_PBUFFER_BIT 0x0001
#define EGL_RENDERABLE_TYPE 0x3040
#define EGL_OPENGL_BIT 0x0008
#define EGL_RED_SIZE 0x3024
#define EGL_GREEN_SIZE 0x3023
#define EGL_BLUE_SIZE 0x3022
#define EGL_ALPHA_SIZE 0x3021
#define EGL_WIDTH 0x3057
#define EGL_HEIGHT 0x3056
#define EGL_OPENGL_API 0x30A2
#define EGL_PLATFORM_DEVICE_EXT 0x313F
#define EGL_CUDA_DEVICE_NV 0x323A

#define GL_ARRAY_BUFFER 0x8892
#define GL_DYNAMIC_DRAW 0x88E8
#define GL_FRAMEBUFFER 0x8D40
#define GL_RENDERBUFFER 0x8D41
#define GL_RGBA8 0x8058
#define GL_COLOR_ATTACHMENT0 0x8CE0
#define GL_FRAMEBUFFER_COMPLETE 0x8CD5
#define GL_COLOR_BUFFER_BIT 0x4000
#define GL_BLEND 0x0BE2
#define GL_ONE 1
#define GL_POINTS 0
#define GL_FLOAT 0x1406
#define GL_VERTEX_ARRAY 0x8074
#define GL_RGBA 0x1908
#define GL_UNSIGNED_BYTE 0x1401
#define GL_PROJECTION 0x1701
#define GL_MODELVIEW 0x1700
#define GL_PACK_ALIGNMENT 0x0D05

#define EGL_FUNCS(X) \
  X(EGLDisplay, eglGetDisplay, (void *)) \
  X(unsigned, eglInitialize, (EGLDisplay, EGLint *, EGLint *)) \
  X(unsigned, eglChooseConfig, (EGLDisplay, const EGLint *, EGLConfig *, \
                                EGLint, EGLint *)) \
  X(unsigned, eglBindAPI, (unsigned)) \
  X(EGLSurface, eglCreatePbufferSurface, (EGLDisplay, EGLConfig, \
                                          const EGLint *)) \
  X(EGLContext, eglCreateContext, (EGLDisplay, EGLConfig, EGLContext, \
                                   const EGLint *)) \
  X(unsigned, eglMakeCurrent, (EGLDisplay, EGLSurface, EGLSurface, \
                               EGLContext)) \
  X(unsigned, eglDestroyContext, (EGLDisplay, EGLContext)) \
  X(unsigned, eglDestroySurface, (EGLDisplay, EGLSurface)) \
  X(unsigned, eglTerminate, (EGLDisplay)) \
  X(EGLint, eglGetError, (void)) \
  X(void *, eglGetProcAddress, (const char *))

#define EGL_EXT_FUNCS(X) \
  X(unsigned, eglQueryDevicesEXT, (EGLint, EGLDeviceEXT *, EGLint *)) \
  X(unsigned, eglQueryDeviceAttribEXT, (EGLDeviceEXT, EGLint, intptr_t *)) \
  X(EGLDisplay, eglGetPlatformDisplayEXT, (unsigned, void *, const EGLint *))

#define GL_FUNCS(X) \
  X(void, glGenBuffers, (GLsizei, GLuint *)) \
  X(void, glBindBuffer, (GLenum, GLuint)) \
  X(void, glBufferData, (GLenum, GLsizeiptr, const void *, GLenum)) \
  X(void, glDeleteBuffers, (GLsizei, const GLuint *)) \
  X(void, glGenFramebuffers, (GLsizei, GLuint *)) \
  X(void, glBindFramebuffer, (GLenum, GLuint)) \
  X(void, glDeleteFramebuffers, (GLsizei, const GLuint *)) \
  X(void, glGenRenderbuffers, (GLsizei, GLuint *)) \
  X(void, glBindRenderbuffer, (GLenum, GLuint)) \
  X(void, glRenderbufferStorage, (GLenum, GLenum, GLsizei, GLsizei)) \
  X(void, glDeleteRenderbuffers, (GLsizei, const GLuint *)) \
  X(void, glFramebufferRenderbuffer, (GLenum, GLenum, GLenum, GLuint)) \
  X(GLenum, glCheckFramebufferStatus, (GLenum)) \
  X(void, glViewport, (GLint, GLint, GLsizei, GLsizei)) \
  X(void, glClearColor, (GLfloat, GLfloat, GLfloat, GLfloat)) \
  X(void, glClear, (GLbitfield)) \
  X(void, glEnable, (GLenum)) \
  X(void, glBlendFunc, (GLenum, GLenum)) \
  X(void, glPointSize, (GLfloat)) \
  X(void, glColor4f, (GLfloat, GLfloat, GLfloat, GLfloat)) \
  X(void, glMatrixMode, (GLenum)) \
  X(void, glLoadIdentity, (void)) \
  X(void, glOrtho, (GLdouble, GLdouble, GLdouble, GLdouble, GLdouble, \
                    GLdouble)) \
  X(void, glEnableClientState, (GLenum)) \
  X(void, glVertexPointer, (GLint, GLenum, GLsizei, const void *)) \
  X(void, glDrawArrays, (GLenum, GLint, GLsizei)) \
  X(void, glPixelStorei, (GLenum, GLint)) \
  X(void, glReadPixels, (GLint, GLint, GLsizei, GLsizei, GLenum, GLenum, \
                         void *)) \
  X(void, glFinish, (void)) \
  X(const unsigned char *, glGetString, (GLenum)) \
  X(GLenum, glGetError, (void))

#define FN(ret, name, args) ret (*name) args;
static struct { EGL_FUNCS(FN) EGL_EXT_FUNCS(FN) } egl;
static struct { GL_FUNCS(FN) } gl;
#undef FN

static int load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW);
  void *p;
  if (!lib) {
    fprintf(stderr, "render: no CUDA driver: %s\n", dlerror());
    return 0;
  }
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) return 0; \
  memcpy(&cu.f, &p, sizeof p);
  CU_FUNCS(RESOLVE)
#undef RESOLVE
  return 1;
}

/* libEGL, its device extension, and GL through eglGetProcAddress (NVIDIA
   gives every GL function there), else from libOpenGL or libGL. */
static int load_gl(void) {
  void *lib = dlopen("libEGL.so.1", RTLD_NOW | RTLD_GLOBAL), *p;
  if (!lib) {
    fprintf(stderr, "render: no EGL: %s\n", dlerror());
    return 0;
  }
#define LOAD(ret, f, args) \
  if (!(p = dlsym(lib, #f))) { \
    fprintf(stderr, "render: libEGL lacks %s\n", #f); \
    return 0; \
  } \
  memcpy(&egl.f, &p, sizeof p);
  EGL_FUNCS(LOAD)
#undef LOAD
#define EXT(ret, f, args) \
  p = egl.eglGetProcAddress(#f); \
  memcpy(&egl.f, &p, sizeof p);
  EGL_EXT_FUNCS(EXT)
#undef EXT
  void *gllib = dlopen("libOpenGL.so.0", RTLD_NOW);
  if (!gllib) gllib = dlopen("libGL.so.1", RTLD_NOW);
#define GLFN(ret, f, args) \
  if (!(p = egl.eglGetProcAddress(#f)) && (!gllib || !(p = dlsym(gllib, #f)))) { \
    fprintf(stderr, "render: no GL function %s\n", #f); \
    return 0; \
  } \
  memcpy(&gl.f, &p, sizeof p);
  GL_FUNCS(GLFN)
#undef GLFN
  return 1;
}

typedef struct glstate {
  EGLDisplay dpy;
  EGLSurface surf;
  EGLContext ctx;
  GLuint vbo, fbo, rbo;
} glstate;

/* The EGL device that is CUDA device 0, else the first; a pbuffer context
   made current, a framebuffer of W x H RGBA8 and a vertex buffer of N
   points. */
static int start_gl(glstate *g) {
  EGLDeviceEXT devs[16];
  EGLint ndev = 0, major, minor, nconf = 0;
  if (egl.eglQueryDevicesEXT && egl.eglGetPlatformDisplayEXT &&
      egl.eglQueryDevicesEXT(16, devs, &ndev) && ndev > 0) {
    int pick = 0;
    for (int i = 0; i < ndev && egl.eglQueryDeviceAttribEXT; i++) {
      intptr_t cudadev = -1;
      if (egl.eglQueryDeviceAttribEXT(devs[i], EGL_CUDA_DEVICE_NV, &cudadev) &&
          cudadev == 0) {
        pick = i;
        break;
      }
    }
    g->dpy = egl.eglGetPlatformDisplayEXT(EGL_PLATFORM_DEVICE_EXT, devs[pick],
                                          NULL);
    printf("render: EGL device %d of %d\n", pick, (int)ndev);
  } else {
    g->dpy = egl.eglGetDisplay(NULL);
  }
  static const EGLint cattr[] = {
    EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_BIT,
    EGL_RED_SIZE, 8, EGL_GREEN_SIZE, 8, EGL_BLUE_SIZE, 8, EGL_ALPHA_SIZE, 8,
    EGL_NONE
  };
  static const EGLint sattr[] = { EGL_WIDTH, W, EGL_HEIGHT, H, EGL_NONE };
  EGLConfig cfg;
  if (!g->dpy || !egl.eglInitialize(g->dpy, &major, &minor) ||
      !egl.eglChooseConfig(g->dpy, cattr, &cfg, 1, &nconf) || nconf < 1 ||
      !egl.eglBindAPI(EGL_OPENGL_API) ||
      !(g->surf = egl.eglCreatePbufferSurface(g->dpy, cfg, sattr)) ||
      !(g->ctx = egl.eglCreateContext(g->dpy, cfg, NULL, NULL)) ||
      !egl.eglMakeCurrent(g->dpy, g->surf, g->surf, g->ctx)) {
    fprintf(stderr, "render: EGL setup failed (0x%x)\n",
            (unsigned)egl.eglGetError());
    return 0;
  }
  const unsigned char *version = gl.glGetString(0x1F02 /* GL_VERSION */);
  const unsigned char *renderer = gl.glGetString(0x1F01 /* GL_RENDERER */);
  printf("render: EGL %d.%d, OpenGL %s on %s\n", major, minor,
         version ? (const char *)version : "?",
         renderer ? (const char *)renderer : "?");
  gl.glGenBuffers(1, &g->vbo);
  gl.glBindBuffer(GL_ARRAY_BUFFER, g->vbo);
  gl.glBufferData(GL_ARRAY_BUFFER, (GLsizeiptr)N * 2 * sizeof(float), NULL,
                  GL_DYNAMIC_DRAW);
  gl.glGenFramebuffers(1, &g->fbo);
  gl.glBindFramebuffer(GL_FRAMEBUFFER, g->fbo);
  gl.glGenRenderbuffers(1, &g->rbo);
  gl.glBindRenderbuffer(GL_RENDERBUFFER, g->rbo);
  gl.glRenderbufferStorage(GL_RENDERBUFFER, GL_RGBA8, W, H);
  gl.glFramebufferRenderbuffer(GL_FRAMEBUFFER, GL_COLOR_ATTACHMENT0,
                               GL_RENDERBUFFER, g->rbo);
  if (gl.glCheckFramebufferStatus(GL_FRAMEBUFFER) != GL_FRAMEBUFFER_COMPLETE) {
    fprintf(stderr, "render: the framebuffer is incomplete\n");
    return 0;
  }
  return gl.glGetError() == 0;
}

static void stop_gl(glstate *g) {
  if (!g->ctx) return;
  gl.glDeleteBuffers(1, &g->vbo);
  gl.glDeleteRenderbuffers(1, &g->rbo);
  gl.glDeleteFramebuffers(1, &g->fbo);
  egl.eglMakeCurrent(g->dpy, NULL, NULL, NULL);
  egl.eglDestroyContext(g->dpy, g->ctx);
  egl.eglDestroySurface(g->dpy, g->surf);
  egl.eglTerminate(g->dpy);
}

/* Draws the vertex buffer's points, additively, into the framebuffer. */
static int draw(glstate *g) {
  gl.glBindFramebuffer(GL_FRAMEBUFFER, g->fbo);
  gl.glViewport(0, 0, W, H);
  gl.glClearColor(0.02f, 0.02f, 0.05f, 1);
  gl.glClear(GL_COLOR_BUFFER_BIT);
  gl.glMatrixMode(GL_PROJECTION);
  gl.glLoadIdentity();
  gl.glOrtho(0, 1, 0, 1, -1, 1);
  gl.glMatrixMode(GL_MODELVIEW);
  gl.glLoadIdentity();
  gl.glEnable(GL_BLEND);
  gl.glBlendFunc(GL_ONE, GL_ONE);
  gl.glPointSize(1);
  gl.glColor4f(0.25f, 0.12f, 0.05f, 1);
  gl.glBindBuffer(GL_ARRAY_BUFFER, g->vbo);
  gl.glEnableClientState(GL_VERTEX_ARRAY);
  gl.glVertexPointer(2, GL_FLOAT, 0, NULL);
  gl.glDrawArrays(GL_POINTS, 0, N);
  return gl.glGetError() == 0;
}

/* Reads the image back into rgba (W * H * 4 bytes, top row first). */
static int read_back(glstate *g, unsigned char *rgba) {
  gl.glBindFramebuffer(GL_FRAMEBUFFER, g->fbo);
  gl.glPixelStorei(GL_PACK_ALIGNMENT, 1);
  unsigned char *rows = malloc((size_t)W * H * 4);
  if (!rows) return 0;
  memset(rows, 0xff, (size_t)W * H * 4);
  gl.glReadPixels(0, 0, W, H, GL_RGBA, GL_UNSIGNED_BYTE, rows);
  gl.glFinish();
  if (rows[3] != 255) { /* the corner is the opaque clear colour */
    fprintf(stderr, "render: read back %d %d %d %d at a corner, not the "
            "clear colour (GL error 0x%x)\n", rows[0], rows[1], rows[2],
            rows[3], (unsigned)gl.glGetError());
    free(rows);
    return 0;
  }
  for (int y = 0; y < H; y++) /* GL's rows go bottom up */
    memcpy(rgba + (size_t)y * W * 4, rows + (size_t)(H - 1 - y) * W * 4,
           (size_t)W * 4);
  free(rows);
  return gl.glGetError() == 0;
}

/* -- the kernel file ------------------------------------------------------- */

/* TICKS: what one step adds to ticks[0]; SWIRL: the pull around the
   center. */
static const char kernel_fmt[] =
  "#define TICKS %uu\n"
  "#define SWIRL ((float)%.9g)\n"
  "extern \"C\" __global__ void init(float *pos, float *vel, int n) {\n"
  "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
  "  if (i >= n) return;\n"
  "  unsigned h = (unsigned)i * 2654435761u;\n"
  "  float a = (h & 0xffff) / 65536.0f * 6.2831853f;\n"
  "  float r = 0.05f + 0.3f * ((h >> 16) / 65536.0f);\n"
  "  pos[2 * i] = 0.5f + r * cosf(a);\n"
  "  pos[2 * i + 1] = 0.5f + r * sinf(a);\n"
  "  vel[2 * i] = -0.3f * sinf(a);\n"
  "  vel[2 * i + 1] = 0.3f * cosf(a);\n"
  "}\n"
  "extern \"C\" __global__ void step(float *pos, float *vel, const float *dt,\n"
  "                                 unsigned *ticks, int n) {\n"
  "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
  "  if (i == 0) ticks[0] += TICKS;\n"
  "  if (i >= n) return;\n"
  "  float t = *dt, x = pos[2 * i], y = pos[2 * i + 1];\n"
  "  float vx = vel[2 * i], vy = vel[2 * i + 1];\n"
  "  float dx = x - 0.5f, dy = y - 0.5f;\n"
  "  vx += (-SWIRL * dy - 0.4f * dx) * t;\n"
  "  vy += (SWIRL * dx - 0.4f * dy - 0.2f) * t;\n"
  "  x += vx * t; y += vy * t;\n"
  "  if (x < 0 || x > 1) { vx = -0.9f * vx; x = fminf(fmaxf(x, 0), 1); }\n"
  "  if (y < 0 || y > 1) { vy = -0.9f * vy; y = fminf(fmaxf(y, 0), 1); }\n"
  "  pos[2 * i] = x; pos[2 * i + 1] = y;\n"
  "  vel[2 * i] = vx; vel[2 * i + 1] = vy;\n"
  "}\n";

static int write_kernel(const char *path, unsigned ticks, double swirl,
                        int broken) {
  FILE *f = fopen(path, "w");
  if (!f) return 0;
  fprintf(f, kernel_fmt, ticks, swirl);
  if (broken) fputs("this line is not CUDA C\n", f);
  return fclose(f) == 0;
}

/* -- the engine ------------------------------------------------------------ */

static int traceback(lua_State *L) {
  luaL_traceback(L, L, luaL_tolstring(L, 1, NULL), 1);
  return 1;
}

/* Calls global fn with nargs arguments on top; nres results. */
static int call(lua_State *L, const char *fn, int nargs, int nres) {
  int base = lua_gettop(L) - nargs;
  lua_pushcfunction(L, traceback);
  lua_getglobal(L, fn);
  lua_rotate(L, base + 1, 2);
  if (lua_pcall(L, nargs, nres, base + 1) != LUA_OK) {
    fprintf(stderr, "render: %s: %s\n", fn, lua_tostring(L, -1));
    lua_settop(L, base);
    return 0;
  }
  lua_remove(L, base + 1);
  return 1;
}

/* Under pcall: the engine's stream and GL buffer become globals. */
static int publish(lua_State *L) {
  cugraph_pushstream(L, *(CUstream *)lua_touserdata(L, 1));
  lua_setglobal(L, "stream");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: render OUT_DIR [lua_dir [png_dir]]\n");
    return 2;
  }
  const char *out = argv[1];
  const char *lua_dir = argc > 2 ? argv[2] : CUGRAPH_LUA_DIR;
  const char *png_dir = argc > 3 ? argv[3] : PNG_DIR;
  char kernel[1024], path[1100];
  snprintf(kernel, sizeof kernel, "%s/render_kernel.cu", out);
  CUdevice dev;
  CUcontext ctx;
  CUstream stream = NULL;
  glstate g = {0};
  if (!load_driver() || cu.cuInit(0) || cu.cuDeviceGet(&dev, 0) ||
      cu.cuDevicePrimaryCtxRetain(&ctx, dev) || cu.cuCtxSetCurrent(ctx) ||
      cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) {
    fprintf(stderr, "render: CUDA setup failed\n");
    return 1;
  }
  int ok = load_gl() && start_gl(&g) && write_kernel(kernel, 1, 1.0, 0);
  lua_State *L = ok ? luaL_newstate() : NULL;
  cugraph_graph *graph = NULL;
  cugraph_scalar *dt = NULL;
  unsigned char *rgba = malloc((size_t)W * H * 4);
  if (L) {
    luaL_openlibs(L);
    cugraph_openlibs(L, lua_dir);
    lua_pushinteger(L, g.vbo);
    lua_setglobal(L, "VBO");
    lua_pushinteger(L, g.rbo);
    lua_setglobal(L, "RBO");
    lua_pushinteger(L, N);
    lua_setglobal(L, "N");
    lua_pushstring(L, kernel);
    lua_setglobal(L, "KERNEL");
    lua_pushstring(L, png_dir);
    lua_setglobal(L, "PNG_PATH");
    lua_pushcfunction(L, publish);
    lua_pushlightuserdata(L, &stream);
    ok = lua_pcall(L, 1, 0, 0) == LUA_OK &&
         luaL_loadfile(L, RENDER_SCRIPT) == LUA_OK &&
         lua_pcall(L, 0, 0, 0) == LUA_OK;
    if (!ok) fprintf(stderr, "render: %s\n", luaL_tolstring(L, -1, NULL));
    ok = ok && call(L, "setup", 0, 2);
    if (ok) { /* the graph and its scalar, owned by C from here */
      graph = cugraph_tograph(L, -2);
      dt = cugraph_toscalar(L, -1);
      lua_pop(L, 2);
    }
  }
  float step = 1.0f / 60;
  int images = 0;
  for (int i = 1; ok && i <= FRAMES; i++) {
    if (i == 101) ok = write_kernel(kernel, 1000, -2.0, 0);
    if (i == 201) ok = write_kernel(kernel, 1000, -2.0, 1);
    ok = ok && call(L, "poll", 0, 0); /* the script's hot reload */
    cugraph_scalar_set(dt, &step);
    CUresult r = cugraph_graph_launch(graph, stream);
    if (r) {
      fprintf(stderr, "render: cugraph_graph_launch: %d\n", (int)r);
      ok = 0;
    }
    if (ok && i % 100 == 0) {
      /* the script stamps a mark into the framebuffer's renderbuffer, an
         Array while mapped, after the points are drawn */
      ok = call(L, "present", 0, 0) && draw(&g) && call(L, "stamp", 0, 0) &&
           read_back(&g, rgba);
      size_t lit = 0, marked = 0;
      for (size_t p = 0; ok && p < (size_t)W * H; p++)
        lit += rgba[4 * p] > 20;
      for (int y = H - MARK; ok && y < H; y++) /* GL's first rows: the */
        for (int x = 0; x < MARK; x++) {       /* array's row 0 */
          const unsigned char *px = rgba + ((size_t)y * W + (size_t)x) * 4;
          marked += px[0] == 255 && px[1] == 0 && px[2] == 255;
        }
      if (ok && marked != MARK * MARK) {
        fprintf(stderr, "render: frame %d: %zu of the %d pixels of the "
                "script's mark\n", i, marked, MARK * MARK);
        ok = 0;
      }
      snprintf(path, sizeof path, "%s/frame_%03d.png", out, i);
      lua_pushstring(L, path);
      lua_pushinteger(L, W);
      lua_pushinteger(L, H);
      lua_pushlstring(L, (const char *)rgba, (size_t)W * H * 4);
      ok = ok && call(L, "save", 4, 0);
      printf("render: frame %d: %zu lit pixels -> %s\n", i, lit, path);
      if (lit < 1000) {
        fprintf(stderr, "render: frame %d is nearly blank\n", i);
        ok = 0;
      }
      images += ok;
    }
  }
  if (ok && call(L, "shutdown", 0, 3)) {
    lua_Integer ticks = lua_tointeger(L, -3), reloads = lua_tointeger(L, -2),
                failures = lua_tointeger(L, -1);
    printf("render: %d frames, ticks %lld, %lld reload, %lld failed reload\n",
           FRAMES, (long long)ticks, (long long)reloads, (long long)failures);
    ok = ticks == 100 + 200 * 1000 && reloads == 1 && failures == 1;
    if (!ok) fprintf(stderr, "render: expected ticks 200100, 1 reload, 1 "
                     "failed reload\n");
  } else {
    ok = 0;
  }
  if (L) lua_close(L);
  /* the C graph outlives the state: its pins are still allocated */
  if (ok && graph) {
    CUresult r = cugraph_graph_launch(graph, stream);
    ok = r == CUDA_SUCCESS && cu.cuStreamSynchronize(stream) == CUDA_SUCCESS;
    printf("render: a launch after lua_close: %s\n", ok ? "ok" : "FAILED");
  }
  cugraph_scalar_release(dt);
  cugraph_graph_release(graph);
  free(rgba);
  stop_gl(&g);
  if (stream) cu.cuStreamDestroy(stream);
  cu.cuDevicePrimaryCtxRelease(dev);
  ok = ok && images == FRAMES / 100;
  puts(ok ? "render: ok" : "render: FAILED");
  return ok ? 0 : 1;
}
