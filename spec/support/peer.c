/* peer: the other API of the external-memory specs, as a Lua module: it
   allocates memory and semaphores and exports them as file descriptors
   for cuda.external_memory and cuda.external_semaphore to import, and
   signals, waits for and reads the semaphores from its side.

     local peer = package.loadlib(build .. "/peer.so", "luaopen_peer")()
     assert(peer.open("memfd"))      -- or "vulkan"; nil, why when it cannot
     local m = peer.memory(bytes)     -- m:fd() (a new descriptor each call,
                                      -- all of one memory), m:size(), m:close()
     local s = peer.semaphore("timeline") -- or "binary": s:fd(), s:signal([v]),
                                      -- s:value() (timeline), s:wait([v [, seconds]])

   "memfd" is the software driver's model (sim/driver/external.c): memory is
   a memfd, a semaphore a memfd holding a little-endian uint64 counter.
   "vulkan" exports device memory and semaphores of the first Vulkan device
   (libvulkan.so.1 opened with dlopen; built only where <vulkan/vulkan.h>
   is found), for the real driver. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <lua.h>
#include <lauxlib.h>

#if __has_include(<vulkan/vulkan.h>)
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>
#define HAVE_VULKAN 1
#endif

static int vulkan; /* the mode peer.open chose: 0 memfd, 1 vulkan */

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* -- Vulkan ----------------------------------------------------------------- */

#ifdef HAVE_VULKAN
#define VK_FUNCS(X) X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkCreateDevice) \
  X(vkGetDeviceProcAddr) X(vkGetPhysicalDeviceMemoryProperties)
#define VKD_FUNCS(X) X(vkGetDeviceQueue) X(vkCreateBuffer) \
  X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) \
  X(vkFreeMemory) X(vkBindBufferMemory) X(vkGetMemoryFdKHR) \
  X(vkCreateSemaphore) X(vkDestroySemaphore) X(vkGetSemaphoreFdKHR) \
  X(vkSignalSemaphore) X(vkWaitSemaphores) X(vkGetSemaphoreCounterValue) \
  X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) \
  X(vkQueueWaitIdle)
#define VK_FIELD(f) PFN_##f f;
static struct {
  VkInstance inst;
  VkPhysicalDevice phys;
  VkDevice dev;
  VkQueue queue;
  VK_FUNCS(VK_FIELD)
  VKD_FUNCS(VK_FIELD)
} vk;

/* Opens Vulkan: a 1.2 instance, the first device with a queue, external
   memory and semaphore file descriptors, timeline semaphores. NULL, or
   why not. */
static const char *vk_open(void) {
  static char why[160];
  void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return "no Vulkan loader (libvulkan.so.1)";
  PFN_vkGetInstanceProcAddr gipa;
  void *sym = dlsym(lib, "vkGetInstanceProcAddr");
  memcpy(&gipa, &sym, sizeof gipa); /* POSIX: a function's address */
  PFN_vkCreateInstance create =
      gipa ? (PFN_vkCreateInstance)gipa(NULL, "vkCreateInstance") : NULL;
  if (!create) return "the Vulkan loader has no vkCreateInstance";
  VkApplicationInfo app = { .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                            .apiVersion = VK_API_VERSION_1_2 };
  VkInstanceCreateInfo ici = { .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                               .pApplicationInfo = &app };
  VkResult r = create(&ici, NULL, &vk.inst);
  if (r) {
    snprintf(why, sizeof why, "vkCreateInstance: %d (no Vulkan driver?)", r);
    return why;
  }
#define VK_LOAD(f) vk.f = (PFN_##f)gipa(vk.inst, #f);
  VK_FUNCS(VK_LOAD)
  uint32_t n = 1;
  r = vk.vkEnumeratePhysicalDevices(vk.inst, &n, &vk.phys);
  if ((r && r != VK_INCOMPLETE) || !n) return "no Vulkan device";
  VkQueueFamilyProperties q[16];
  uint32_t nq = 16;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(vk.phys, &nq, q);
  uint32_t fam = 0;
  while (fam < nq && !q[fam].queueCount) fam++;
  if (fam == nq) return "the Vulkan device has no queue";
  float prio = 1;
  VkDeviceQueueCreateInfo qci = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
    .queueFamilyIndex = fam, .queueCount = 1, .pQueuePriorities = &prio };
  static const char *const exts[] = { "VK_KHR_external_memory_fd",
                                      "VK_KHR_external_semaphore_fd" };
  VkPhysicalDeviceVulkan12Features f12 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
    .timelineSemaphore = VK_TRUE };
  VkDeviceCreateInfo dci = { .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                             .pNext = &f12, .queueCreateInfoCount = 1,
                             .pQueueCreateInfos = &qci,
                             .enabledExtensionCount = 2,
                             .ppEnabledExtensionNames = exts };
  if ((r = vk.vkCreateDevice(vk.phys, &dci, NULL, &vk.dev))) {
    snprintf(why, sizeof why, "vkCreateDevice: %d", r);
    return why;
  }
#define VKD_LOAD(f) vk.f = (PFN_##f)vk.vkGetDeviceProcAddr(vk.dev, #f);
  VKD_FUNCS(VKD_LOAD)
  vk.vkGetDeviceQueue(vk.dev, fam, 0, &vk.queue);
  return NULL;
}

/* Device memory of at least bytes, exportable as opaque descriptors. */
static int vk_memory(size_t bytes, VkDeviceMemory *mem, size_t *size) {
  VkExternalMemoryBufferCreateInfo ext = {
    .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
    .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT };
  VkBufferCreateInfo bci = { .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .pNext = &ext, .size = bytes,
                             .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT };
  VkBuffer buf;
  if (vk.vkCreateBuffer(vk.dev, &bci, NULL, &buf)) return -1;
  VkMemoryRequirements req;
  vk.vkGetBufferMemoryRequirements(vk.dev, buf, &req);
  VkPhysicalDeviceMemoryProperties mp;
  vk.vkGetPhysicalDeviceMemoryProperties(vk.phys, &mp);
  uint32_t t = 0;
  while (t < mp.memoryTypeCount &&
         (!(req.memoryTypeBits & (1u << t)) ||
          !(mp.memoryTypes[t].propertyFlags &
            VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)))
    t++;
  VkExportMemoryAllocateInfo exp = {
    .sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
    .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT };
  VkMemoryAllocateInfo mai = { .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                               .pNext = &exp, .allocationSize = req.size,
                               .memoryTypeIndex = t };
  int bad = t == mp.memoryTypeCount ||
            vk.vkAllocateMemory(vk.dev, &mai, NULL, mem) != VK_SUCCESS;
  if (!bad) vk.vkBindBufferMemory(vk.dev, buf, *mem, 0);
  vk.vkDestroyBuffer(vk.dev, buf, NULL); /* the memory stays */
  *size = (size_t)req.size;
  return bad ? -1 : 0;
}

/* Submits an empty batch that waits for (wait) or signals binary s, and
   waits up to seconds for it: 1 when it completed. */
static int vk_binary(VkSemaphore s, int wait, double seconds) {
  VkFenceCreateInfo fci = { .sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO };
  VkFence fence;
  if (vk.vkCreateFence(vk.dev, &fci, NULL, &fence)) return 0;
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  VkSubmitInfo si = { .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO };
  if (wait) {
    si.waitSemaphoreCount = 1;
    si.pWaitSemaphores = &s;
    si.pWaitDstStageMask = &stage;
  } else {
    si.signalSemaphoreCount = 1;
    si.pSignalSemaphores = &s;
  }
  int done = vk.vkQueueSubmit(vk.queue, 1, &si, fence) == VK_SUCCESS &&
             vk.vkWaitForFences(vk.dev, 1, &fence, VK_TRUE,
                                (uint64_t)(seconds * 1e9)) == VK_SUCCESS;
  if (!done) vk.vkQueueWaitIdle(vk.queue); /* the fence must be idle */
  vk.vkDestroyFence(vk.dev, fence, NULL);
  return done;
}
#endif

/* -- objects ---------------------------------------------------------------- */

typedef struct peer_obj {
  int sem, timeline, closed;
  size_t size;
  int fd;               /* memfd: the file */
  void *map;            /* memfd semaphore: its counter */
#ifdef HAVE_VULKAN
  VkDeviceMemory mem;
  VkSemaphore vs;
#endif
} peer_obj;

static peer_obj *check(lua_State *L, int sem) {
  peer_obj *o = luaL_checkudata(L, 1, sem ? "peer.Semaphore" : "peer.Memory");
  if (o->closed) luaL_error(L, "peer: the object is closed");
  return o;
}

static peer_obj *newobj(lua_State *L, int sem) {
  peer_obj *o = lua_newuserdatauv(L, sizeof *o, 0);
  memset(o, 0, sizeof *o);
  o->sem = sem;
  o->fd = -1;
  luaL_setmetatable(L, sem ? "peer.Semaphore" : "peer.Memory");
  return o;
}

static int memfd(lua_State *L, size_t bytes) {
  int fd = memfd_create("peer", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0)
    return luaL_error(L, "peer: memfd: %s", strerror(errno));
  return fd;
}

/* peer.memory(bytes) */
static int peer_memory(lua_State *L) {
  lua_Integer bytes = luaL_checkinteger(L, 1);
  luaL_argcheck(L, bytes > 0, 1, "bytes must be positive");
  peer_obj *o = newobj(L, 0);
  o->size = (size_t)bytes;
#ifdef HAVE_VULKAN
  if (vulkan) {
    if (vk_memory((size_t)bytes, &o->mem, &o->size))
      return luaL_error(L, "peer: no exportable Vulkan memory of %d bytes",
                        (int)bytes);
    return 1;
  }
#endif
  o->fd = memfd(L, (size_t)bytes);
  return 1;
}

/* peer.semaphore(kind): "timeline" (from 0) or "binary" */
static int peer_semaphore(lua_State *L) {
  static const char *const kinds[] = { "binary", "timeline", NULL };
  int timeline = luaL_checkoption(L, 1, NULL, kinds);
  peer_obj *o = newobj(L, 1);
  o->timeline = timeline;
#ifdef HAVE_VULKAN
  if (vulkan) {
    VkSemaphoreTypeCreateInfo type = {
      .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
      .semaphoreType = timeline ? VK_SEMAPHORE_TYPE_TIMELINE
                                : VK_SEMAPHORE_TYPE_BINARY };
    VkExportSemaphoreCreateInfo exp = {
      .sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO, .pNext = &type,
      .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT };
    VkSemaphoreCreateInfo sci = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
                                  .pNext = &exp };
    if (vk.vkCreateSemaphore(vk.dev, &sci, NULL, &o->vs))
      return luaL_error(L, "peer: vkCreateSemaphore failed");
    return 1;
  }
#endif
  o->fd = memfd(L, 8);
  o->map = mmap(NULL, 8, PROT_READ | PROT_WRITE, MAP_SHARED, o->fd, 0);
  if (o->map == MAP_FAILED) return luaL_error(L, "peer: mmap failed");
  return 1;
}

/* o:fd(): a new descriptor of the object, for one import */
static int obj_fd(lua_State *L) {
  peer_obj *o = luaL_testudata(L, 1, "peer.Memory");
  if (!o) o = check(L, 1);
  if (o->closed) return luaL_error(L, "peer: the object is closed");
  int fd = -1;
#ifdef HAVE_VULKAN
  if (vulkan && !o->sem) {
    VkMemoryGetFdInfoKHR gi = { .sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
      .memory = o->mem, .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT };
    if (vk.vkGetMemoryFdKHR(vk.dev, &gi, &fd)) fd = -1;
  } else if (vulkan) {
    VkSemaphoreGetFdInfoKHR gi = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
      .semaphore = o->vs, .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT };
    if (vk.vkGetSemaphoreFdKHR(vk.dev, &gi, &fd)) fd = -1;
  } else
#endif
    fd = dup(o->fd);
  if (fd < 0) return luaL_error(L, "peer: no descriptor to export");
  lua_pushinteger(L, fd);
  return 1;
}

static int mem_size(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)check(L, 0)->size);
  return 1;
}

static volatile uint64_t *counter(peer_obj *o) { return o->map; }

/* s:signal([v]): a timeline to v, a binary once */
static int sem_signal(lua_State *L) {
  peer_obj *o = check(L, 1);
  uint64_t v = o->timeline ? (uint64_t)luaL_checkinteger(L, 2) : 1;
#ifdef HAVE_VULKAN
  if (vulkan) {
    int ok;
    if (o->timeline) {
      VkSemaphoreSignalInfo si = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                   .semaphore = o->vs, .value = v };
      ok = vk.vkSignalSemaphore(vk.dev, &si) == VK_SUCCESS;
    } else {
      ok = vk_binary(o->vs, 0, 10);
    }
    if (!ok) return luaL_error(L, "peer: the signal failed");
    return 0;
  }
#endif
  __atomic_store_n(counter(o), v, __ATOMIC_SEQ_CST);
  return 0;
}

/* s:value(): a timeline's counter */
static int sem_value(lua_State *L) {
  peer_obj *o = check(L, 1);
  uint64_t v = 0;
  if (!o->timeline) return luaL_error(L, "peer: a binary semaphore has no value");
#ifdef HAVE_VULKAN
  if (vulkan) {
    if (vk.vkGetSemaphoreCounterValue(vk.dev, o->vs, &v))
      return luaL_error(L, "peer: vkGetSemaphoreCounterValue failed");
  } else
#endif
    v = __atomic_load_n(counter(o), __ATOMIC_SEQ_CST);
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

/* s:wait([v [, seconds]]): until a timeline reaches v, or a binary is
   signalled (which it consumes); false after seconds (default 10). */
static int sem_wait(lua_State *L) {
  peer_obj *o = check(L, 1);
  uint64_t v = o->timeline ? (uint64_t)luaL_checkinteger(L, 2) : 1;
  double seconds = luaL_optnumber(L, o->timeline ? 3 : 2, 10);
  int done = 0;
#ifdef HAVE_VULKAN
  if (vulkan) {
    if (o->timeline) {
      VkSemaphoreWaitInfo wi = { .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                                 .semaphoreCount = 1, .pSemaphores = &o->vs,
                                 .pValues = &v };
      done = vk.vkWaitSemaphores(vk.dev, &wi, (uint64_t)(seconds * 1e9)) ==
             VK_SUCCESS;
    } else {
      done = vk_binary(o->vs, 1, seconds);
    }
    lua_pushboolean(L, done);
    return 1;
  }
#endif
  for (double end = now() + seconds; !done && now() < end;) {
    uint64_t c = __atomic_load_n(counter(o), __ATOMIC_SEQ_CST);
    if (o->timeline) done = c >= v;
    else done = c && __atomic_compare_exchange_n(counter(o), &c, 0, 0,
                                                 __ATOMIC_SEQ_CST,
                                                 __ATOMIC_SEQ_CST);
    if (!done) usleep(200);
  }
  lua_pushboolean(L, done);
  return 1;
}

static int obj_close(lua_State *L) {
  peer_obj *o = lua_touserdata(L, 1);
  if (!o || o->closed) return 0;
  o->closed = 1;
#ifdef HAVE_VULKAN
  if (vulkan) {
    vk.vkQueueWaitIdle(vk.queue);
    if (o->sem) vk.vkDestroySemaphore(vk.dev, o->vs, NULL);
    else vk.vkFreeMemory(vk.dev, o->mem, NULL);
  }
#endif
  if (o->map) munmap(o->map, 8);
  if (o->fd >= 0) close(o->fd);
  return 0;
}

/* peer.open(mode): true, or nil and why the mode cannot be used */
static int peer_open(lua_State *L) {
  static const char *const modes[] = { "memfd", "vulkan", NULL };
  int m = luaL_checkoption(L, 1, NULL, modes);
  const char *why = NULL;
#ifdef HAVE_VULKAN
  static const char *opened;
  static int tried;
  if (m && !tried) {
    tried = 1;
    opened = vk_open();
  }
  if (m) why = opened;
#else
  if (m) why = "built without <vulkan/vulkan.h>";
#endif
  if (why) {
    lua_pushnil(L);
    lua_pushstring(L, why);
    return 2;
  }
  vulkan = m;
  lua_pushboolean(L, 1);
  return 1;
}

/* Whether fd is open (the specs check that an import took it, or not). */
static int peer_isopen(lua_State *L) {
  lua_pushboolean(L, fcntl((int)luaL_checkinteger(L, 1), F_GETFD) != -1);
  return 1;
}

int luaopen_peer(lua_State *L);
int luaopen_peer(lua_State *L) {
  static const luaL_Reg mem[] = {
    {"fd", obj_fd}, {"size", mem_size}, {"close", obj_close}, {NULL, NULL}
  };
  static const luaL_Reg sem[] = {
    {"fd", obj_fd}, {"signal", sem_signal}, {"value", sem_value},
    {"wait", sem_wait}, {"close", obj_close}, {NULL, NULL}
  };
  const luaL_Reg *methods[2] = { mem, sem };
  const char *names[2] = { "peer.Memory", "peer.Semaphore" };
  for (int i = 0; i < 2; i++) {
    luaL_newmetatable(L, names[i]);
    lua_newtable(L);
    luaL_setfuncs(L, methods[i], 0);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, obj_close);
    lua_setfield(L, -2, "__gc");
    lua_pop(L, 1);
  }
  static const luaL_Reg funcs[] = {
    {"open", peer_open}, {"memory", peer_memory},
    {"semaphore", peer_semaphore}, {"isopen", peer_isopen}, {NULL, NULL}
  };
  luaL_newlib(L, funcs);
  return 1;
}
