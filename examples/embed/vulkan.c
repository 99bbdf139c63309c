/* vulkan: an engine that renders headless with Vulkan into memory CUDA
   shares with it, and orders the two APIs with one timeline semaphore.
   Each frame, a graph the script captured fills the image's background
   and moves the particles; Vulkan then draws the particles over it.

   - Vulkan runs headless: an instance (1.2 or later), the physical device
     whose deviceUUID is the CUDA device's (cuDeviceGetUuid), a graphics
     queue, VK_KHR_external_memory_fd, VK_KHR_external_semaphore_fd and
     the timelineSemaphore feature; no surface, swapchain or window.
     libvulkan.so.1 and libcuda are opened with dlopen, and every Vulkan
     function comes from vkGetInstanceProcAddr / vkGetDeviceProcAddr:
     nothing links against either.
   - The engine makes three exportable objects and hands their file
     descriptors to the script (vulkan.lua returns the function that takes
     them): a W x H RGBA8 image (optimal tiling, a dedicated allocation),
     a vertex buffer of N particles (two f32 each) and a timeline
     semaphore (initial value 0). CUDA owns each fd once it imported it.
   - The script imports them (cuda.external_memory, cuda.external_semaphore,
     mem:array(...):surface(), mem:buffer), compiles two kernels and
     captures one frame:
       wait_external(sem, wait_at); background (a surface store of every
       pixel); the particles' step; signal_external(sem, signal_at)
     and returns the graph, its scalars wait_at, signal_at (u64) and frame
     (u32), and its stream. The engine takes C handles (cugraph_tograph,
     cugraph_toscalar, cugraph_checkstream).
   - Frame f (0, 1, ...): the engine sets wait_at = 2f, signal_at = 2f + 1
     and frame = f, launches the C graph, then submits a command buffer
     that waits for 2f + 1, draws the N points over the image (render pass
     with loadOp LOAD: CUDA's background stays) and signals 2f + 2. The
     image stays in VK_IMAGE_LAYOUT_GENERAL from its one transition out of
     UNDEFINED, before the first frame; each frame acquires the image and
     the vertex buffer from VK_QUEUE_FAMILY_EXTERNAL and releases them
     back to it.
   - After FRAMES frames: vkWaitSemaphores for 2 * FRAMES, the image is
     copied to a host buffer and written to OUT/vulkan.png (the png module,
     build/examples/png.so). The checks: every pixel is either the last
     frame's background (recomputed here, exactly) or the particles'
     colour, enough of each appear, and the CUDA stream finished cleanly.
     Then the C handles are released, lua_close destroys CUDA's imports,
     and Vulkan is torn down.
   - Any Vulkan, CUDA or script failure prints the call and its result and
     exits 1. No Vulkan loader, or no Vulkan device that is the CUDA device,
     prints why and exits 77 (SKIP), as examples/run-all.sh expects.

     vulkan OUT_DIR [lua_dir [png_dir]]                   exits 0 when all pass */
#define _POSIX_C_SOURCE 200809L
#define VK_NO_PROTOTYPES
#include <dlfcn.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>
#include <cuda.h>
#include <lua.h>
#include <lauxlib.h>
#include <lualib.h>
#include "cugraph.h"
#include "vulkan_spv.h"

#ifndef CUGRAPH_LUA_DIR
#define CUGRAPH_LUA_DIR "lua"
#endif
#ifndef VULKAN_SCRIPT
#define VULKAN_SCRIPT "examples/embed/vulkan.lua"
#endif
#ifndef PNG_DIR
#define PNG_DIR "build/examples"
#endif

enum { W = 512, H = 512, N = 4096, FRAMES = 120, EXIT_SKIP = 77 };
/* vkWaitSemaphores' limit: a frame that never comes is a failure */
#define WAIT_NS (10ull * 1000 * 1000 * 1000)

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
                                                      noreturn));
static void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2),
                                                      noreturn));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("vulkan: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\nvulkan: FAILED\n", stderr);
  va_end(ap);
  exit(1);
}

/* The reason goes to stdout as the last line: run-all.sh quotes it. */
static void skip(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fflush(stderr);
  fputs("vulkan: SKIP: ", stdout);
  vprintf(fmt, ap);
  putchar('\n');
  va_end(ap);
  exit(EXIT_SKIP);
}

/* -- the driver ------------------------------------------------------------ */

/* Only what the engine itself needs: the device's UUID, to find the same
   GPU in Vulkan, and a last synchronize of the script's stream. */
#define CU_FUNCS(X) X(cuInit) X(cuDeviceGet) X(cuStreamSynchronize)
#define FIELD(f) __typeof__(f) *f;
static struct {
  CU_FUNCS(FIELD)
  CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
  CUresult (*cuGetErrorName)(CUresult, const char **);
} cu;
#undef FIELD
#define STR(x) #x
#define XSTR(x) STR(x)

static const char *cu_name(CUresult r) {
  const char *s = NULL;
  if (!cu.cuGetErrorName || cu.cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
    return "?";
  return s;
}

#define CU(call) \
  do { \
    CUresult r_ = (call); \
    if (r_ != CUDA_SUCCESS) fail("%s: %s (%d)", #call, cu_name(r_), (int)r_); \
  } while (0)

/* libcuda as the core finds it (CUGRAPH_LUA_LIBCUDA, else libcuda.so.1);
   cuDeviceGetUuid_v2 where the driver has it, else cuDeviceGetUuid. */
static void load_driver(void) {
  const char *name = getenv("CUGRAPH_LUA_LIBCUDA");
  void *lib = dlopen(name && *name ? name : "libcuda.so.1", RTLD_NOW);
  void *p;
  if (!lib) fail("no CUDA driver: %s", dlerror());
#define RESOLVE(f) \
  if (!(p = dlsym(lib, XSTR(f)))) fail("libcuda lacks %s", XSTR(f)); \
  memcpy(&cu.f, &p, sizeof p);
  CU_FUNCS(RESOLVE)
#undef RESOLVE
  if (!(p = dlsym(lib, "cuDeviceGetUuid_v2")) &&
      !(p = dlsym(lib, "cuDeviceGetUuid")))
    fail("libcuda lacks cuDeviceGetUuid");
  memcpy(&cu.cuDeviceGetUuid, &p, sizeof p);
  if ((p = dlsym(lib, "cuGetErrorName"))) memcpy(&cu.cuGetErrorName, &p, sizeof p);
}

/* -- Vulkan's functions ---------------------------------------------------- */

#define VK_GLOBAL_FUNCS(X) \
  X(vkCreateInstance) X(vkEnumerateInstanceExtensionProperties)

#define VK_INSTANCE_FUNCS(X) \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) \
  X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2) \
  X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceQueueFamilyProperties) \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkGetPhysicalDeviceFormatProperties) \
  X(vkGetPhysicalDeviceImageFormatProperties2) \
  X(vkGetPhysicalDeviceExternalBufferProperties) \
  X(vkGetPhysicalDeviceExternalSemaphoreProperties) \
  X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) \
  X(vkGetDeviceProcAddr)

#define VK_DEVICE_FUNCS(X) \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) \
  X(vkQueueSubmit) X(vkQueueWaitIdle) \
  X(vkCreateImage) X(vkDestroyImage) X(vkGetImageMemoryRequirements2) \
  X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements2) \
  X(vkAllocateMemory) X(vkFreeMemory) X(vkBindImageMemory) \
  X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) \
  X(vkCreateImageView) X(vkDestroyImageView) \
  X(vkCreateSemaphore) X(vkDestroySemaphore) X(vkWaitSemaphores) \
  X(vkGetSemaphoreCounterValue) \
  X(vkCreateRenderPass) X(vkDestroyRenderPass) \
  X(vkCreateFramebuffer) X(vkDestroyFramebuffer) \
  X(vkCreateShaderModule) X(vkDestroyShaderModule) \
  X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) \
  X(vkCreateGraphicsPipelines) X(vkDestroyPipeline) \
  X(vkCreateCommandPool) X(vkDestroyCommandPool) \
  X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) \
  X(vkCmdPipelineBarrier) X(vkCmdBeginRenderPass) X(vkCmdEndRenderPass) \
  X(vkCmdBindPipeline) X(vkCmdBindVertexBuffers) X(vkCmdPushConstants) \
  X(vkCmdDraw) X(vkCmdCopyImageToBuffer)

/* the device extensions' entry points; NULL when not enabled */
#define VK_EXT_FUNCS(X) X(vkGetMemoryFdKHR) X(vkGetSemaphoreFdKHR)

#define FIELD(f) PFN_##f f;
static struct {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  VK_GLOBAL_FUNCS(FIELD) VK_INSTANCE_FUNCS(FIELD) VK_DEVICE_FUNCS(FIELD)
  VK_EXT_FUNCS(FIELD)
} vk;
#undef FIELD

static const char *vk_name(VkResult r) {
  switch (r) {
#define C(x) case x: return #x;
    C(VK_SUCCESS) C(VK_NOT_READY) C(VK_TIMEOUT) C(VK_INCOMPLETE)
    C(VK_ERROR_OUT_OF_HOST_MEMORY) C(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    C(VK_ERROR_INITIALIZATION_FAILED) C(VK_ERROR_DEVICE_LOST)
    C(VK_ERROR_MEMORY_MAP_FAILED) C(VK_ERROR_LAYER_NOT_PRESENT)
    C(VK_ERROR_EXTENSION_NOT_PRESENT) C(VK_ERROR_FEATURE_NOT_PRESENT)
    C(VK_ERROR_INCOMPATIBLE_DRIVER) C(VK_ERROR_TOO_MANY_OBJECTS)
    C(VK_ERROR_FORMAT_NOT_SUPPORTED) C(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    C(VK_ERROR_OUT_OF_POOL_MEMORY) C(VK_ERROR_UNKNOWN)
#undef C
  default: return "?";
  }
}

#define VK(call) \
  do { \
    VkResult r_ = (call); \
    if (r_ != VK_SUCCESS) fail("%s: %s (%d)", #call, vk_name(r_), (int)r_); \
  } while (0)

/* -- the renderer ---------------------------------------------------------- */

typedef struct vkstate {
  VkInstance instance;
  VkPhysicalDevice gpu;
  VkDevice device;
  uint32_t family; /* a queue family with graphics */
  VkQueue queue;
  float point_size; /* 3 with the largePoints feature, else 1 */
  VkImage image;
  VkDeviceMemory image_mem;
  VkDeviceSize image_bytes; /* the allocation's size, for CUDA's import */
  VkImageView view;
  VkBuffer vertex;
  VkDeviceMemory vertex_mem;
  VkDeviceSize vertex_bytes;
  int vertex_dedicated; /* the driver asked for a dedicated allocation */
  VkSemaphore timeline;
  VkBuffer readback;
  VkDeviceMemory readback_mem;
  VkRenderPass pass;
  VkFramebuffer framebuffer;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  VkCommandPool pool;
  VkCommandBuffer init_cmd, frame_cmd, read_cmd;
} vkstate;

/* The loader: its one exported entry point, then the global functions.
   Skips when there is no loader or it cannot make a 1.2 instance. */
static uint32_t load_vulkan(void) {
  void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL), *p;
  if (!lib) skip("no Vulkan loader: %s", dlerror());
  if (!(p = dlsym(lib, "vkGetInstanceProcAddr")))
    skip("libvulkan.so.1 lacks vkGetInstanceProcAddr");
  memcpy(&vk.vkGetInstanceProcAddr, &p, sizeof p);
#define LOAD(f) \
  if (!(vk.f = (PFN_##f)vk.vkGetInstanceProcAddr(NULL, #f))) \
    skip("the Vulkan loader lacks %s", #f);
  VK_GLOBAL_FUNCS(LOAD)
#undef LOAD
  PFN_vkEnumerateInstanceVersion version = (PFN_vkEnumerateInstanceVersion)
    vk.vkGetInstanceProcAddr(NULL, "vkEnumerateInstanceVersion");
  uint32_t v = VK_API_VERSION_1_0;
  if (version) VK(version(&v));
  if (v < VK_API_VERSION_1_2)
    skip("the Vulkan loader is version %u.%u; this needs 1.2",
         VK_API_VERSION_MAJOR(v), VK_API_VERSION_MINOR(v));
  return v;
}

static int has_extension(const VkExtensionProperties *e, uint32_t n,
                         const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(e[i].extensionName, name)) return 1;
  return 0;
}

static void print_uuid(FILE *f, const uint8_t *u) {
  for (int i = 0; i < 16; i++)
    fprintf(f, "%02x%s", u[i], i == 3 || i == 5 || i == 7 || i == 9 ? "-" : "");
}

/* The instance and the device that is the CUDA device (uuid), with a
   graphics queue, the two fd extensions and timeline semaphores.
   semaphore_fd 0 leaves VK_KHR_external_semaphore_fd out (a test on a
   driver without it; the engine always asks for it). */
static void start_vulkan(vkstate *v, const uint8_t uuid[VK_UUID_SIZE],
                         int semaphore_fd) {
  uint32_t loader = load_vulkan();
  VkApplicationInfo app = {
    .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
    .pApplicationName = "cugraph-lua vulkan example",
    .apiVersion = loader >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3
                                               : VK_API_VERSION_1_2,
  };
  VkInstanceCreateInfo ici = {
    .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
    .pApplicationInfo = &app,
  };
  VkResult r = vk.vkCreateInstance(&ici, NULL, &v->instance);
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER)
    skip("vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver "
         "for version 1.2)");
  if (r != VK_SUCCESS)
    fail("vkCreateInstance: %s (%d)", vk_name(r), (int)r);
#define LOAD(f) \
  if (!(vk.f = (PFN_##f)vk.vkGetInstanceProcAddr(v->instance, #f))) \
    fail("vkGetInstanceProcAddr(%s): NULL", #f);
  VK_INSTANCE_FUNCS(LOAD)
#undef LOAD

  /* the physical device of the CUDA device's UUID */
  VkPhysicalDevice gpus[32];
  uint32_t ngpu = 32;
  r = vk.vkEnumeratePhysicalDevices(v->instance, &ngpu, gpus);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE)
    fail("vkEnumeratePhysicalDevices: %s (%d)", vk_name(r), (int)r);
  VkPhysicalDeviceProperties props = {0};
  for (uint32_t i = 0; i < ngpu && !v->gpu; i++) {
    VkPhysicalDeviceIDProperties id = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
    };
    VkPhysicalDeviceProperties2 p2 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id,
    };
    vk.vkGetPhysicalDeviceProperties(gpus[i], &p2.properties);
    if (p2.properties.apiVersion < VK_API_VERSION_1_1) continue;
    vk.vkGetPhysicalDeviceProperties2(gpus[i], &p2);
    if (!memcmp(id.deviceUUID, uuid, VK_UUID_SIZE)) {
      v->gpu = gpus[i];
      props = p2.properties;
    }
  }
  if (!v->gpu) {
    fprintf(stderr, "vulkan: the CUDA device is ");
    print_uuid(stderr, uuid);
    fprintf(stderr, "; %u Vulkan device%s:\n", ngpu, ngpu == 1 ? "" : "s");
    for (uint32_t i = 0; i < ngpu; i++) {
      VkPhysicalDeviceIDProperties id = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
      };
      VkPhysicalDeviceProperties2 p2 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &id,
      };
      vk.vkGetPhysicalDeviceProperties2(gpus[i], &p2);
      fprintf(stderr, "vulkan:   %s ", p2.properties.deviceName);
      print_uuid(stderr, id.deviceUUID);
      fputc('\n', stderr);
    }
    skip("no Vulkan device is the CUDA device (%u Vulkan device%s, none of "
         "its UUID)", ngpu, ngpu == 1 ? "" : "s");
  }
  printf("vulkan: %s, Vulkan %u.%u.%u, device ", props.deviceName,
         VK_API_VERSION_MAJOR(props.apiVersion),
         VK_API_VERSION_MINOR(props.apiVersion),
         VK_API_VERSION_PATCH(props.apiVersion));
  print_uuid(stdout, uuid);
  putchar('\n');
  if (props.apiVersion < VK_API_VERSION_1_2)
    fail("the device has Vulkan %u.%u; this needs 1.2 (timeline semaphores)",
         VK_API_VERSION_MAJOR(props.apiVersion),
         VK_API_VERSION_MINOR(props.apiVersion));

  /* features: timelineSemaphore (needed), largePoints (bigger points) */
  VkPhysicalDeviceVulkan12Features f12 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
  };
  VkPhysicalDeviceFeatures2 f2 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f12,
  };
  vk.vkGetPhysicalDeviceFeatures2(v->gpu, &f2);
  if (!f12.timelineSemaphore) fail("the device lacks timelineSemaphore");
  VkPhysicalDeviceVulkan12Features want12 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
    .timelineSemaphore = VK_TRUE,
  };
  VkPhysicalDeviceFeatures2 want = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &want12,
  };
  want.features.largePoints = f2.features.largePoints;
  v->point_size = f2.features.largePoints ? 3.0f : 1.0f;

  /* the queue family */
  VkQueueFamilyProperties fam[32];
  uint32_t nfam = 32;
  vk.vkGetPhysicalDeviceQueueFamilyProperties(v->gpu, &nfam, fam);
  v->family = UINT32_MAX;
  for (uint32_t i = 0; i < nfam && v->family == UINT32_MAX; i++)
    if (fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) v->family = i;
  if (v->family == UINT32_MAX) fail("the device has no graphics queue");

  /* the extensions (VK_KHR_external_memory, _semaphore and their
     capabilities are core in 1.1) */
  const char *exts[2] = { VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME,
                          VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME };
  uint32_t nexts = semaphore_fd ? 2 : 1, navail = 0;
  VK(vk.vkEnumerateDeviceExtensionProperties(v->gpu, NULL, &navail, NULL));
  VkExtensionProperties *avail = calloc(navail ? navail : 1, sizeof *avail);
  if (!avail) fail("out of memory");
  VK(vk.vkEnumerateDeviceExtensionProperties(v->gpu, NULL, &navail, avail));
  for (uint32_t i = 0; i < nexts; i++)
    if (!has_extension(avail, navail, exts[i]))
      fail("the device lacks %s", exts[i]);
  free(avail);

  float priority = 1;
  VkDeviceQueueCreateInfo qci = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
    .queueFamilyIndex = v->family, .queueCount = 1,
    .pQueuePriorities = &priority,
  };
  VkDeviceCreateInfo dci = {
    .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &want,
    .queueCreateInfoCount = 1, .pQueueCreateInfos = &qci,
    .enabledExtensionCount = nexts, .ppEnabledExtensionNames = exts,
  };
  VK(vk.vkCreateDevice(v->gpu, &dci, NULL, &v->device));
#define LOAD(f) \
  if (!(vk.f = (PFN_##f)vk.vkGetDeviceProcAddr(v->device, #f))) \
    fail("vkGetDeviceProcAddr(%s): NULL", #f);
  VK_DEVICE_FUNCS(LOAD)
  LOAD(vkGetMemoryFdKHR)
  if (semaphore_fd) LOAD(vkGetSemaphoreFdKHR)
#undef LOAD
  vk.vkGetDeviceQueue(v->device, v->family, 0, &v->queue);
}

/* A memory type of bits with all of flags. */
static uint32_t memory_type(const vkstate *v, uint32_t bits,
                            VkMemoryPropertyFlags flags, const char *what) {
  VkPhysicalDeviceMemoryProperties mp;
  vk.vkGetPhysicalDeviceMemoryProperties(v->gpu, &mp);
  for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
    if ((bits >> i & 1) && (mp.memoryTypes[i].propertyFlags & flags) == flags)
      return i;
  fail("no memory type for %s (types 0x%x, flags 0x%x)", what, bits,
       (unsigned)flags);
}

/* An OPAQUE_FD of an exportable allocation: a new descriptor each call. */
static int export_fd(const vkstate *v, VkDeviceMemory mem) {
  VkMemoryGetFdInfoKHR gi = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR, .memory = mem,
    .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  int fd = -1;
  VK(vk.vkGetMemoryFdKHR(v->device, &gi, &fd));
  return fd;
}

/* The shared objects: the image (dedicated), the vertex buffer and the
   timeline semaphore, each exportable as an OPAQUE_FD, after asking the
   driver that they can be; and the host buffer the image is read into. */
static void make_shared(vkstate *v, int semaphore_fd) {
  const VkFormat format = VK_FORMAT_R8G8B8A8_UNORM;
  const VkImageUsageFlags usage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT |
    VK_IMAGE_USAGE_TRANSFER_SRC_BIT | VK_IMAGE_USAGE_STORAGE_BIT;
  const VkFormatFeatureFlags need = VK_FORMAT_FEATURE_COLOR_ATTACHMENT_BIT |
    VK_FORMAT_FEATURE_STORAGE_IMAGE_BIT | VK_FORMAT_FEATURE_TRANSFER_SRC_BIT;
  VkFormatProperties fp;
  vk.vkGetPhysicalDeviceFormatProperties(v->gpu, format, &fp);
  if ((fp.optimalTilingFeatures & need) != need)
    fail("R8G8B8A8_UNORM, optimal tiling, lacks format features 0x%x",
         (unsigned)(need & ~fp.optimalTilingFeatures));
  VkPhysicalDeviceExternalImageFormatInfo xii = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_IMAGE_FORMAT_INFO,
    .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  VkPhysicalDeviceImageFormatInfo2 ifi = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_IMAGE_FORMAT_INFO_2,
    .pNext = &xii, .format = format, .type = VK_IMAGE_TYPE_2D,
    .tiling = VK_IMAGE_TILING_OPTIMAL, .usage = usage,
  };
  VkExternalImageFormatProperties xip = {
    .sType = VK_STRUCTURE_TYPE_EXTERNAL_IMAGE_FORMAT_PROPERTIES,
  };
  VkImageFormatProperties2 ifp = {
    .sType = VK_STRUCTURE_TYPE_IMAGE_FORMAT_PROPERTIES_2, .pNext = &xip,
  };
  VK(vk.vkGetPhysicalDeviceImageFormatProperties2(v->gpu, &ifi, &ifp));
  if (!(xip.externalMemoryProperties.externalMemoryFeatures &
        VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT))
    fail("the image cannot be exported as an OPAQUE_FD");

  VkExternalMemoryImageCreateInfo xici = {
    .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_IMAGE_CREATE_INFO,
    .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  VkImageCreateInfo ici = {
    .sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO, .pNext = &xici,
    .imageType = VK_IMAGE_TYPE_2D, .format = format,
    .extent = { W, H, 1 }, .mipLevels = 1, .arrayLayers = 1,
    .samples = VK_SAMPLE_COUNT_1_BIT, .tiling = VK_IMAGE_TILING_OPTIMAL,
    .usage = usage, .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
  };
  VK(vk.vkCreateImage(v->device, &ici, NULL, &v->image));
  VkImageMemoryRequirementsInfo2 imri = {
    .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_REQUIREMENTS_INFO_2,
    .image = v->image,
  };
  VkMemoryRequirements2 req = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_REQUIREMENTS_2,
  };
  vk.vkGetImageMemoryRequirements2(v->device, &imri, &req);
  VkMemoryDedicatedAllocateInfo ded = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
    .image = v->image,
  };
  VkExportMemoryAllocateInfo xmai = {
    .sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO, .pNext = &ded,
    .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  VkMemoryAllocateInfo mai = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &xmai,
    .allocationSize = req.memoryRequirements.size,
    .memoryTypeIndex = memory_type(v, req.memoryRequirements.memoryTypeBits,
      VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "the image"),
  };
  VK(vk.vkAllocateMemory(v->device, &mai, NULL, &v->image_mem));
  VK(vk.vkBindImageMemory(v->device, v->image, v->image_mem, 0));
  v->image_bytes = mai.allocationSize;
  VkImageViewCreateInfo vci = {
    .sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO, .image = v->image,
    .viewType = VK_IMAGE_VIEW_TYPE_2D, .format = format,
    .subresourceRange = { VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1 },
  };
  VK(vk.vkCreateImageView(v->device, &vci, NULL, &v->view));

  /* the vertex buffer: 2 * N floats; dedicated only where the driver
     requires it */
  VkPhysicalDeviceExternalBufferInfo xbi = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO,
    .usage = VK_BUFFER_USAGE_VERTEX_BUFFER_BIT,
    .handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  VkExternalBufferProperties xbp = {
    .sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES,
  };
  vk.vkGetPhysicalDeviceExternalBufferProperties(v->gpu, &xbi, &xbp);
  if (!(xbp.externalMemoryProperties.externalMemoryFeatures &
        VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT))
    fail("a vertex buffer cannot be exported as an OPAQUE_FD");
  VkExternalMemoryBufferCreateInfo xbci = {
    .sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
    .handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  VkBufferCreateInfo bci = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .pNext = &xbci,
    .size = (VkDeviceSize)N * 2 * sizeof(float),
    .usage = VK_BUFFER_USAGE_VERTEX_BUFFER_BIT,
    .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VK(vk.vkCreateBuffer(v->device, &bci, NULL, &v->vertex));
  VkMemoryDedicatedRequirements dreq = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_REQUIREMENTS,
  };
  VkBufferMemoryRequirementsInfo2 bmri = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_REQUIREMENTS_INFO_2,
    .buffer = v->vertex,
  };
  req.pNext = &dreq;
  vk.vkGetBufferMemoryRequirements2(v->device, &bmri, &req);
  v->vertex_dedicated = dreq.requiresDedicatedAllocation ||
    (xbp.externalMemoryProperties.externalMemoryFeatures &
     VK_EXTERNAL_MEMORY_FEATURE_DEDICATED_ONLY_BIT);
  ded.image = VK_NULL_HANDLE;
  ded.buffer = v->vertex;
  xmai.pNext = v->vertex_dedicated ? &ded : NULL;
  mai.allocationSize = req.memoryRequirements.size;
  mai.memoryTypeIndex = memory_type(v, req.memoryRequirements.memoryTypeBits,
    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, "the vertex buffer");
  VK(vk.vkAllocateMemory(v->device, &mai, NULL, &v->vertex_mem));
  VK(vk.vkBindBufferMemory(v->device, v->vertex, v->vertex_mem, 0));
  v->vertex_bytes = mai.allocationSize;

  /* the timeline semaphore, from 0 */
  VkSemaphoreTypeCreateInfo stci = {
    .sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0,
  };
  VkExportSemaphoreCreateInfo xsci = {
    .sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO, .pNext = &stci,
    .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  if (semaphore_fd) {
    VkPhysicalDeviceExternalSemaphoreInfo xsi = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_SEMAPHORE_INFO,
      .pNext = &stci,
      .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
    };
    VkExternalSemaphoreProperties xsp = {
      .sType = VK_STRUCTURE_TYPE_EXTERNAL_SEMAPHORE_PROPERTIES,
    };
    vk.vkGetPhysicalDeviceExternalSemaphoreProperties(v->gpu, &xsi, &xsp);
    if (!(xsp.externalSemaphoreFeatures &
          VK_EXTERNAL_SEMAPHORE_FEATURE_EXPORTABLE_BIT))
      fail("a timeline semaphore cannot be exported as an OPAQUE_FD");
  }
  VkSemaphoreCreateInfo sci = {
    .sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
    .pNext = semaphore_fd ? (const void *)&xsci : (const void *)&stci,
  };
  VK(vk.vkCreateSemaphore(v->device, &sci, NULL, &v->timeline));

  /* the readback buffer, host-visible */
  VkBufferCreateInfo rci = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
    .size = (VkDeviceSize)W * H * 4, .usage = VK_BUFFER_USAGE_TRANSFER_DST_BIT,
    .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
  };
  VK(vk.vkCreateBuffer(v->device, &rci, NULL, &v->readback));
  bmri.buffer = v->readback;
  req.pNext = NULL;
  vk.vkGetBufferMemoryRequirements2(v->device, &bmri, &req);
  VkMemoryAllocateInfo rai = {
    .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
    .allocationSize = req.memoryRequirements.size,
    .memoryTypeIndex = memory_type(v, req.memoryRequirements.memoryTypeBits,
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
      "the readback buffer"),
  };
  VK(vk.vkAllocateMemory(v->device, &rai, NULL, &v->readback_mem));
  VK(vk.vkBindBufferMemory(v->device, v->readback, v->readback_mem, 0));
}

/* The fd of the timeline semaphore (a new descriptor each call). */
static int export_semaphore_fd(const vkstate *v) {
  VkSemaphoreGetFdInfoKHR gi = {
    .sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
    .semaphore = v->timeline,
    .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
  };
  int fd = -1;
  VK(vk.vkGetSemaphoreFdKHR(v->device, &gi, &fd));
  return fd;
}

static VkShaderModule shader(const vkstate *v, const uint32_t *code,
                             size_t bytes) {
  VkShaderModuleCreateInfo ci = {
    .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
    .codeSize = bytes, .pCode = code,
  };
  VkShaderModule m;
  VK(vk.vkCreateShaderModule(v->device, &ci, NULL, &m));
  return m;
}

/* A render pass that loads the image (GENERAL before, during and after),
   its framebuffer, and the pipeline that draws the points. */
static void make_pipeline(vkstate *v) {
  VkAttachmentDescription att = {
    .format = VK_FORMAT_R8G8B8A8_UNORM, .samples = VK_SAMPLE_COUNT_1_BIT,
    .loadOp = VK_ATTACHMENT_LOAD_OP_LOAD,
    .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
    .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
    .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
    .initialLayout = VK_IMAGE_LAYOUT_GENERAL,
    .finalLayout = VK_IMAGE_LAYOUT_GENERAL,
  };
  VkAttachmentReference ref = { 0, VK_IMAGE_LAYOUT_GENERAL };
  VkSubpassDescription sub = {
    .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
    .colorAttachmentCount = 1, .pColorAttachments = &ref,
  };
  /* chained to the acquire and release barriers around the pass */
  VkSubpassDependency deps[2] = {
    { .srcSubpass = VK_SUBPASS_EXTERNAL, .dstSubpass = 0,
      .srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
      .dstStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
      .srcAccessMask = 0,
      .dstAccessMask = VK_ACCESS_COLOR_ATTACHMENT_READ_BIT |
                       VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT },
    { .srcSubpass = 0, .dstSubpass = VK_SUBPASS_EXTERNAL,
      .srcStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
      .dstStageMask = VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
      .srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
      .dstAccessMask = 0 },
  };
  VkRenderPassCreateInfo rpci = {
    .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
    .attachmentCount = 1, .pAttachments = &att,
    .subpassCount = 1, .pSubpasses = &sub,
    .dependencyCount = 2, .pDependencies = deps,
  };
  VK(vk.vkCreateRenderPass(v->device, &rpci, NULL, &v->pass));
  VkFramebufferCreateInfo fci = {
    .sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO,
    .renderPass = v->pass, .attachmentCount = 1, .pAttachments = &v->view,
    .width = W, .height = H, .layers = 1,
  };
  VK(vk.vkCreateFramebuffer(v->device, &fci, NULL, &v->framebuffer));

  VkPushConstantRange push = { VK_SHADER_STAGE_VERTEX_BIT, 0, sizeof(float) };
  VkPipelineLayoutCreateInfo lci = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
    .pushConstantRangeCount = 1, .pPushConstantRanges = &push,
  };
  VK(vk.vkCreatePipelineLayout(v->device, &lci, NULL, &v->layout));
  VkShaderModule vs = shader(v, points_vert, sizeof points_vert);
  VkShaderModule fs = shader(v, points_frag, sizeof points_frag);
  VkPipelineShaderStageCreateInfo stages[2] = {
    { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_VERTEX_BIT, .module = vs, .pName = "main" },
    { .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_FRAGMENT_BIT, .module = fs, .pName = "main" },
  };
  VkVertexInputBindingDescription bind = {
    0, 2 * sizeof(float), VK_VERTEX_INPUT_RATE_VERTEX
  };
  VkVertexInputAttributeDescription attr = {
    0, 0, VK_FORMAT_R32G32_SFLOAT, 0
  };
  VkPipelineVertexInputStateCreateInfo vin = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
    .vertexBindingDescriptionCount = 1, .pVertexBindingDescriptions = &bind,
    .vertexAttributeDescriptionCount = 1, .pVertexAttributeDescriptions = &attr,
  };
  VkPipelineInputAssemblyStateCreateInfo ia = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
    .topology = VK_PRIMITIVE_TOPOLOGY_POINT_LIST,
  };
  VkViewport vp = { 0, 0, W, H, 0, 1 };
  VkRect2D sc = { { 0, 0 }, { W, H } };
  VkPipelineViewportStateCreateInfo vps = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
    .viewportCount = 1, .pViewports = &vp, .scissorCount = 1, .pScissors = &sc,
  };
  VkPipelineRasterizationStateCreateInfo rs = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
    .polygonMode = VK_POLYGON_MODE_FILL, .cullMode = VK_CULL_MODE_NONE,
    .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE, .lineWidth = 1,
  };
  VkPipelineMultisampleStateCreateInfo ms = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
    .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT,
  };
  VkPipelineColorBlendAttachmentState blend = { /* opaque: no blending */
    .colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT |
                      VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT,
  };
  VkPipelineColorBlendStateCreateInfo cb = {
    .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
    .attachmentCount = 1, .pAttachments = &blend,
  };
  VkGraphicsPipelineCreateInfo pci = {
    .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
    .stageCount = 2, .pStages = stages, .pVertexInputState = &vin,
    .pInputAssemblyState = &ia, .pViewportState = &vps,
    .pRasterizationState = &rs, .pMultisampleState = &ms,
    .pColorBlendState = &cb, .layout = v->layout, .renderPass = v->pass,
    .subpass = 0,
  };
  VK(vk.vkCreateGraphicsPipelines(v->device, VK_NULL_HANDLE, 1, &pci, NULL,
                                  &v->pipeline));
  vk.vkDestroyShaderModule(v->device, vs, NULL);
  vk.vkDestroyShaderModule(v->device, fs, NULL);
}

/* A barrier that hands the image from queue family src to dst (or, with
   both VK_QUEUE_FAMILY_IGNORED, only changes its layout). */
static VkImageMemoryBarrier image_barrier(const vkstate *v, VkImageLayout from,
    VkImageLayout to, uint32_t src, uint32_t dst, VkAccessFlags src_access,
    VkAccessFlags dst_access) {
  VkImageMemoryBarrier b = {
    .sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
    .srcAccessMask = src_access, .dstAccessMask = dst_access,
    .oldLayout = from, .newLayout = to,
    .srcQueueFamilyIndex = src, .dstQueueFamilyIndex = dst,
    .image = v->image,
    .subresourceRange = { VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1 },
  };
  return b;
}

static VkBufferMemoryBarrier buffer_barrier(VkBuffer buf, uint32_t src,
    uint32_t dst, VkAccessFlags src_access, VkAccessFlags dst_access) {
  VkBufferMemoryBarrier b = {
    .sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER,
    .srcAccessMask = src_access, .dstAccessMask = dst_access,
    .srcQueueFamilyIndex = src, .dstQueueFamilyIndex = dst,
    .buffer = buf, .offset = 0, .size = VK_WHOLE_SIZE,
  };
  return b;
}

/* The three command buffers, recorded once:
   init   UNDEFINED -> GENERAL, then the image released to CUDA (EXTERNAL);
   frame  acquire the image and the vertex buffer from EXTERNAL, draw the
          N points over the image, release both to EXTERNAL (submitted
          once a frame; SIMULTANEOUS_USE: frame f + 1 is queued while
          frame f may still be pending);
   read   acquire the image, copy it to the readback buffer, make that
          visible to the host. */
static void record(vkstate *v) {
  const uint32_t ext = VK_QUEUE_FAMILY_EXTERNAL, ign = VK_QUEUE_FAMILY_IGNORED;
  const VkImageLayout gen = VK_IMAGE_LAYOUT_GENERAL;
  VkCommandPoolCreateInfo pci = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
    .queueFamilyIndex = v->family,
  };
  VK(vk.vkCreateCommandPool(v->device, &pci, NULL, &v->pool));
  VkCommandBuffer cmds[3];
  VkCommandBufferAllocateInfo ai = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
    .commandPool = v->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
    .commandBufferCount = 3,
  };
  VK(vk.vkAllocateCommandBuffers(v->device, &ai, cmds));
  v->init_cmd = cmds[0];
  v->frame_cmd = cmds[1];
  v->read_cmd = cmds[2];
  VkCommandBufferBeginInfo once = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
    .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
  };
  VkCommandBufferBeginInfo again = {
    .sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
    .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT,
  };

  /* init */
  VkImageMemoryBarrier ib = image_barrier(v, VK_IMAGE_LAYOUT_UNDEFINED, gen,
                                          ign, ign, 0, 0);
  VK(vk.vkBeginCommandBuffer(v->init_cmd, &once));
  vk.vkCmdPipelineBarrier(v->init_cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT,
                          VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, 0, 0, NULL, 0,
                          NULL, 1, &ib);
  ib = image_barrier(v, gen, gen, v->family, ext, 0, 0);
  vk.vkCmdPipelineBarrier(v->init_cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                          VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0, NULL, 0,
                          NULL, 1, &ib);
  VK(vk.vkEndCommandBuffer(v->init_cmd));

  /* frame: the acquires' first scope is the semaphore wait's stages */
  const VkPipelineStageFlags draw_stages =
    VK_PIPELINE_STAGE_VERTEX_INPUT_BIT |
    VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
  VK(vk.vkBeginCommandBuffer(v->frame_cmd, &again));
  ib = image_barrier(v, gen, gen, ext, v->family, 0,
                     VK_ACCESS_COLOR_ATTACHMENT_READ_BIT |
                     VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT);
  VkBufferMemoryBarrier bb = buffer_barrier(v->vertex, ext, v->family, 0,
    VK_ACCESS_VERTEX_ATTRIBUTE_READ_BIT);
  vk.vkCmdPipelineBarrier(v->frame_cmd, draw_stages, draw_stages, 0, 0, NULL,
                          1, &bb, 1, &ib);
  VkRenderPassBeginInfo rbi = {
    .sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO,
    .renderPass = v->pass, .framebuffer = v->framebuffer,
    .renderArea = { { 0, 0 }, { W, H } },
  };
  vk.vkCmdBeginRenderPass(v->frame_cmd, &rbi, VK_SUBPASS_CONTENTS_INLINE);
  vk.vkCmdBindPipeline(v->frame_cmd, VK_PIPELINE_BIND_POINT_GRAPHICS,
                       v->pipeline);
  VkDeviceSize zero = 0;
  vk.vkCmdBindVertexBuffers(v->frame_cmd, 0, 1, &v->vertex, &zero);
  vk.vkCmdPushConstants(v->frame_cmd, v->layout, VK_SHADER_STAGE_VERTEX_BIT,
                        0, sizeof(float), &v->point_size);
  vk.vkCmdDraw(v->frame_cmd, N, 1, 0, 0);
  vk.vkCmdEndRenderPass(v->frame_cmd);
  ib = image_barrier(v, gen, gen, v->family, ext,
                     VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT, 0);
  bb = buffer_barrier(v->vertex, v->family, ext, 0, 0);
  vk.vkCmdPipelineBarrier(v->frame_cmd, draw_stages,
                          VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, 0, 0, NULL,
                          1, &bb, 1, &ib);
  VK(vk.vkEndCommandBuffer(v->frame_cmd));

  /* read */
  VK(vk.vkBeginCommandBuffer(v->read_cmd, &once));
  ib = image_barrier(v, gen, gen, ext, v->family, 0,
                     VK_ACCESS_TRANSFER_READ_BIT);
  vk.vkCmdPipelineBarrier(v->read_cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                          VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 0, NULL,
                          1, &ib);
  VkBufferImageCopy region = {
    .imageSubresource = { VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1 },
    .imageExtent = { W, H, 1 },
  };
  vk.vkCmdCopyImageToBuffer(v->read_cmd, v->image, gen, v->readback, 1,
                            &region);
  bb = buffer_barrier(v->readback, ign, ign, VK_ACCESS_TRANSFER_WRITE_BIT,
                      VK_ACCESS_HOST_READ_BIT);
  vk.vkCmdPipelineBarrier(v->read_cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_HOST_BIT, 0, 0, NULL, 1, &bb, 0,
                          NULL);
  VK(vk.vkEndCommandBuffer(v->read_cmd));
}

/* Submits cmd and waits for the queue to drain (no semaphores). */
static void submit_and_wait(vkstate *v, VkCommandBuffer cmd) {
  VkSubmitInfo si = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
    .commandBufferCount = 1, .pCommandBuffers = &cmd,
  };
  VK(vk.vkQueueSubmit(v->queue, 1, &si, VK_NULL_HANDLE));
  VK(vk.vkQueueWaitIdle(v->queue));
}

/* Frame f's draw: waits on the GPU for CUDA's wait, signals done. */
static void submit_frame(vkstate *v, uint64_t wait, uint64_t done) {
  VkTimelineSemaphoreSubmitInfo ts = {
    .sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
    .waitSemaphoreValueCount = 1, .pWaitSemaphoreValues = &wait,
    .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &done,
  };
  VkPipelineStageFlags stages = VK_PIPELINE_STAGE_VERTEX_INPUT_BIT |
    VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT;
  VkSubmitInfo si = {
    .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ts,
    .waitSemaphoreCount = 1, .pWaitSemaphores = &v->timeline,
    .pWaitDstStageMask = &stages,
    .commandBufferCount = 1, .pCommandBuffers = &v->frame_cmd,
    .signalSemaphoreCount = 1, .pSignalSemaphores = &v->timeline,
  };
  VK(vk.vkQueueSubmit(v->queue, 1, &si, VK_NULL_HANDLE));
}

/* Waits on the host until the timeline reaches value (WAIT_NS at most). */
static void wait_timeline(vkstate *v, uint64_t value) {
  VkSemaphoreWaitInfo wi = {
    .sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
    .semaphoreCount = 1, .pSemaphores = &v->timeline, .pValues = &value,
  };
  VkResult r = vk.vkWaitSemaphores(v->device, &wi, WAIT_NS);
  if (r == VK_TIMEOUT) {
    uint64_t now = 0;
    vk.vkGetSemaphoreCounterValue(v->device, v->timeline, &now);
    fail("vkWaitSemaphores(%" PRIu64 "): VK_TIMEOUT after %llu s; the "
         "timeline is at %" PRIu64 " (even: CUDA's wait or work is stuck; "
         "odd: Vulkan's)", value, WAIT_NS / 1000000000ull, now);
  }
  if (r != VK_SUCCESS)
    fail("vkWaitSemaphores(%" PRIu64 "): %s (%d)", value, vk_name(r), (int)r);
}

/* The image, read back into rgba (W * H * 4 bytes, top row first). */
static void read_image(vkstate *v, unsigned char *rgba) {
  submit_and_wait(v, v->read_cmd);
  void *p;
  VK(vk.vkMapMemory(v->device, v->readback_mem, 0, VK_WHOLE_SIZE, 0, &p));
  memcpy(rgba, p, (size_t)W * H * 4);
  vk.vkUnmapMemory(v->device, v->readback_mem);
}

/* Every object, device idle first. The exported fds are CUDA's. */
static void stop_vulkan(vkstate *v) {
  if (!v->device) return;
  VK(vk.vkDeviceWaitIdle(v->device));
  vk.vkDestroyCommandPool(v->device, v->pool, NULL);
  vk.vkDestroyPipeline(v->device, v->pipeline, NULL);
  vk.vkDestroyPipelineLayout(v->device, v->layout, NULL);
  vk.vkDestroyFramebuffer(v->device, v->framebuffer, NULL);
  vk.vkDestroyRenderPass(v->device, v->pass, NULL);
  vk.vkDestroyImageView(v->device, v->view, NULL);
  vk.vkDestroyImage(v->device, v->image, NULL);
  vk.vkFreeMemory(v->device, v->image_mem, NULL);
  vk.vkDestroyBuffer(v->device, v->vertex, NULL);
  vk.vkFreeMemory(v->device, v->vertex_mem, NULL);
  vk.vkDestroyBuffer(v->device, v->readback, NULL);
  vk.vkFreeMemory(v->device, v->readback_mem, NULL);
  vk.vkDestroySemaphore(v->device, v->timeline, NULL);
  vk.vkDestroyDevice(v->device, NULL);
  vk.vkDestroyInstance(v->instance, NULL);
  memset(v, 0, sizeof *v);
}

/* -- the image's checks ---------------------------------------------------- */

/* The background kernel's pixel (x, y) at frame f, as vulkan.lua's
   background kernel computes it (integers only: exact). */
static void background(int x, int y, unsigned f, unsigned char px[4]) {
  px[0] = (unsigned char)(((unsigned)x + 2u * f) & 63u);
  px[1] = (unsigned char)(32 + y * 96 / H);
  px[2] = (unsigned char)(96u + (((unsigned)(x + y) + f) & 127u));
  px[3] = 255;
}

/* points.frag's colour in 8 bits, to within the driver's rounding */
static int is_particle(const unsigned char *p) {
  return p[0] >= 253 && p[1] >= 214 && p[1] <= 220 && p[2] >= 48 &&
         p[2] <= 54 && p[3] == 255;
}

typedef struct counts { size_t background, particles, other; } counts;

/* Every pixel is the background of frame f or a particle. */
static counts count_pixels(const unsigned char *rgba, unsigned f) {
  counts c = {0, 0, 0};
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      const unsigned char *p = rgba + ((size_t)y * W + x) * 4;
      unsigned char bg[4];
      background(x, y, f, bg);
      if (!memcmp(p, bg, 4)) c.background++;
      else if (is_particle(p)) c.particles++;
      else if (c.other++ < 5)
        fprintf(stderr, "vulkan: pixel (%d, %d) is %d %d %d %d: neither "
                "frame %u's background (%d %d %d %d) nor a particle\n", x, y,
                p[0], p[1], p[2], p[3], f, bg[0], bg[1], bg[2], bg[3]);
    }
  return c;
}

/* -- the script ------------------------------------------------------------ */

static int traceback(lua_State *L) {
  luaL_traceback(L, L, luaL_tolstring(L, 1, NULL), 1);
  return 1;
}

/* Runs f (a lua_CFunction) with a light userdata argument under pcall;
   fails with the error and its traceback. */
static void protect(lua_State *L, lua_CFunction f, void *ud, const char *what) {
  lua_pushcfunction(L, traceback);
  lua_pushcfunction(L, f);
  lua_pushlightuserdata(L, ud);
  if (lua_pcall(L, 1, 0, -3) != LUA_OK)
    fail("%s: %s", what, lua_tostring(L, -1));
  lua_pop(L, 1);
}

typedef struct setup {
  const vkstate *v;
  int image_fd, vertex_fd, sem_fd;
  cugraph_graph *graph;
  cugraph_scalar *wait_at, *signal_at, *frame;
  CUstream stream;
} setup;

static cugraph_scalar *scalar_of(lua_State *L, int idx, const char *type,
                                 const char *name) {
  cugraph_scalar *s = cugraph_toscalar(L, idx);
  if (strcmp(cugraph_scalar_type(s), type)) {
    const char *t = cugraph_scalar_type(s);
    cugraph_scalar_release(s);
    luaL_error(L, "%s: a %s scalar, expected %s", name, t, type);
  }
  return s;
}

/* Under pcall: loads the script, calls the function it returns with the
   shared objects, takes C handles to what that returns. */
static int run_setup(lua_State *L) {
  setup *s = lua_touserdata(L, 1);
  if (luaL_loadfile(L, VULKAN_SCRIPT) != LUA_OK) return lua_error(L);
  lua_call(L, 0, 1);
  if (!lua_isfunction(L, -1))
    return luaL_error(L, "%s returned a %s, not its setup function",
                      VULKAN_SCRIPT, luaL_typename(L, -1));
  lua_pushinteger(L, s->image_fd);
  lua_pushinteger(L, (lua_Integer)s->v->image_bytes);
  lua_pushinteger(L, W);
  lua_pushinteger(L, H);
  lua_pushinteger(L, s->vertex_fd);
  lua_pushinteger(L, (lua_Integer)s->v->vertex_bytes);
  lua_pushinteger(L, N);
  lua_pushinteger(L, s->sem_fd);
  lua_pushboolean(L, s->v->vertex_dedicated);
  lua_call(L, 9, 5); /* graph, wait_at, signal_at, frame, stream */
  s->stream = cugraph_checkstream(L, -1);
  s->graph = cugraph_tograph(L, -5);
  s->wait_at = scalar_of(L, -4, "u64", "wait_at");
  s->signal_at = scalar_of(L, -3, "u64", "signal_at");
  s->frame = scalar_of(L, -2, "u32", "frame");
  return 0;
}

typedef struct image { const char *path, *png_dir; const unsigned char *rgba; } image;

/* Under pcall: png.write(path, W, H, rgba), png from png_dir. */
static int save_png(lua_State *L) {
  image *im = lua_touserdata(L, 1);
  lua_getglobal(L, "package");
  lua_pushfstring(L, "%s/?.so;", im->png_dir);
  lua_getfield(L, -2, "cpath");
  lua_concat(L, 2);
  lua_setfield(L, -2, "cpath");
  lua_getglobal(L, "require");
  lua_pushliteral(L, "png");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "write");
  lua_pushstring(L, im->path);
  lua_pushinteger(L, W);
  lua_pushinteger(L, H);
  lua_pushlstring(L, (const char *)im->rgba, (size_t)W * H * 4);
  lua_call(L, 4, 0);
  return 0;
}

/* -- the engine ------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: vulkan OUT_DIR [lua_dir [png_dir]]\n");
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0); /* in order with stderr in a log */
  const char *out = argv[1];
  const char *lua_dir = argc > 2 ? argv[2] : CUGRAPH_LUA_DIR;
  const char *png_dir = argc > 3 ? argv[3] : PNG_DIR;
  char path[1100];
  snprintf(path, sizeof path, "%s/vulkan.png", out);

  /* the CUDA device the script will use (cuda.select's default) */
  const char *env = getenv("CUGRAPH_LUA_DEVICE");
  int ordinal = env && *env ? atoi(env) : 0;
  CUdevice dev;
  CUuuid uuid;
  load_driver();
  CU(cu.cuInit(0));
  CU(cu.cuDeviceGet(&dev, ordinal));
  CU(cu.cuDeviceGetUuid(&uuid, dev));

  vkstate v = {0};
  start_vulkan(&v, (const uint8_t *)uuid.bytes, 1);
  make_shared(&v, 1);
  make_pipeline(&v);
  record(&v);
  submit_and_wait(&v, v.init_cmd); /* the image in GENERAL, CUDA's */
  printf("vulkan: image %dx%d (%llu bytes), %d particles (%llu bytes%s), "
         "points of %g px\n", W, H, (unsigned long long)v.image_bytes, N,
         (unsigned long long)v.vertex_bytes,
         v.vertex_dedicated ? ", dedicated" : "", (double)v.point_size);

  lua_State *L = luaL_newstate();
  if (!L) fail("luaL_newstate: out of memory");
  luaL_openlibs(L);
  cugraph_openlibs(L, lua_dir);
  lua_pushinteger(L, ordinal);
  lua_setglobal(L, "DEVICE");
  setup s = { .v = &v, .image_fd = export_fd(&v, v.image_mem),
              .vertex_fd = export_fd(&v, v.vertex_mem),
              .sem_fd = export_semaphore_fd(&v) };
  /* from here the fds are CUDA's (or lost with the process on failure) */
  protect(L, run_setup, &s, VULKAN_SCRIPT);

  for (unsigned f = 0; f < FRAMES; f++) {
    uint64_t wait = 2 * (uint64_t)f, signal = wait + 1;
    cugraph_scalar_set(s.wait_at, &wait);
    cugraph_scalar_set(s.signal_at, &signal);
    cugraph_scalar_set(s.frame, &f);
    CUresult r = cugraph_graph_launch(s.graph, s.stream);
    if (r) fail("cugraph_graph_launch (frame %u): %s (%d)", f, cu_name(r),
                (int)r);
    submit_frame(&v, signal, signal + 1);
  }
  wait_timeline(&v, 2 * (uint64_t)FRAMES);
  CU(cu.cuStreamSynchronize(s.stream));

  unsigned char *rgba = malloc((size_t)W * H * 4);
  if (!rgba) fail("out of memory");
  read_image(&v, rgba);
  counts c = count_pixels(rgba, FRAMES - 1);
  image im = { path, png_dir, rgba };
  protect(L, save_png, &im, "png.write");
  printf("vulkan: %d frames; %zu background pixels (frame %d's), %zu "
         "particle pixels, %zu other -> %s\n", FRAMES, c.background,
         FRAMES - 1, c.particles, c.other, path);
  int ok = c.other == 0 && c.background >= (size_t)W * H / 2 &&
           c.particles >= N / 16;
  if (!ok)
    fprintf(stderr, "vulkan: expected only background and particle pixels, "
            "at least %d of the background and %d of particles\n",
            W * H / 2, N / 16);
  free(rgba);

  cugraph_graph_release(s.graph);
  cugraph_scalar_release(s.wait_at);
  cugraph_scalar_release(s.signal_at);
  cugraph_scalar_release(s.frame);
  lua_close(L); /* destroys CUDA's imports of the memory and semaphore */
  stop_vulkan(&v);
  puts(ok ? "vulkan: ok" : "vulkan: FAILED");
  return ok ? 0 : 1;
}
