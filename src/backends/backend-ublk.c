/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Backend "ublk": the engine served to the kernel's ublk driver
 * (linux/ublk_cmd.h). Control commands go to /dev/ublk-control as
 * io_uring URING_CMDs in 128-byte SQEs (ADD_DEV, SET_PARAMS, START_DEV,
 * STOP_DEV, DEL_DEV, GET_DEV_INFO, START/END_USER_RECOVERY; GET_FEATURES
 * and UPDATE_SIZE where the driver has them). Each hardware queue, one per
 * CPU up to MAX_QUEUES (ublk-queues.c), has a thread that owns an io_uring
 * on /dev/ublkcN: it arms every tag with FETCH_REQ, runs each request the
 * kernel brings on the engine's asynchronous path in the same ring, and
 * answers with COMMIT_AND_FETCH_REQ from there (the driver takes commands
 * for a queue only from the thread that fetched them). Data is copied by
 * the driver between the request and a buffer per tag.
 *
 * The node outlives the vblkd that made it: devices are added with
 * UBLK_F_USER_RECOVERY and _REISSUE, so when the queue threads die with
 * their process the driver quiesces the device (within its 5 s monitor
 * period) and requeues what was in flight instead of failing it. A vblkd
 * started again finds the device by the tag it left in the device info
 * (ublksrv_flags and the two reserved words the driver keeps: magic,
 * instance, UUID), assembles the engine, and takes the node over with
 * START_USER_RECOVERY, new queue threads and END_USER_RECOVERY.
 *
 * Linux 6.1's driver sets parameters only before START_DEV: the size of a
 * live device cannot change there (a reconfiguration that changes it is
 * refused); a device added with UBLK_F_UPDATE_SIZE (Linux 6.16 on) may
 * grow, and the driver is told the new size after the swap. Shrinking is
 * refused on every driver: it would have to be told before. The features of newer drivers that
 * change the data path (user copy, zero copy, automatic buffer registration) are not used: no
 * kernel this project is tested on has them, and an untested data path is not one vblk runs. */
#include "config.h"

#include <inttypes.h>
#include <glib/gi18n-lib.h>

#include "backend.h"
#include "engine-runtime.h"
#include "loop-util.h"
#include "ublk-control.h"
#include "ublk-queues.h"
#include "vb-error.h"
#include "vb-report.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/ublk_cmd.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define CONTROL "/dev/ublk-control"
#define TAG_MAGIC 0x6b6c6276u  /* "vblk" */
#define RECOVERY_WAIT_MS 30000 /* the driver quiesces within its 5 s monitor period */

static gboolean
ublk_available (char **reason)
{
  if (access (CONTROL, F_OK) != 0)
    {
      *reason = g_strdup ("no " CONTROL " (kernel module ublk_drv not loaded; Debian 12's "
                          "kernel does not build it)");
      return FALSE;
    }
  return TRUE;
}

/* ---- control commands ---- */

static const char *
op_name (guint32 op)
{
  switch (op)
    {
    case UBLK_CMD_ADD_DEV:
      return "ADD_DEV";
    case UBLK_CMD_SET_PARAMS:
      return "SET_PARAMS";
    case UBLK_CMD_START_DEV:
      return "START_DEV";
    case UBLK_CMD_STOP_DEV:
      return "STOP_DEV";
    case UBLK_CMD_DEL_DEV:
      return "DEL_DEV";
    case UBLK_CMD_START_USER_RECOVERY:
      return "START_USER_RECOVERY";
    case UBLK_CMD_END_USER_RECOVERY:
      return "END_USER_RECOVERY";
    case UBLK_CMD_GET_DEV_INFO:
      return "GET_DEV_INFO";
    case UBLK_U_CMD_GET_FEATURES:
      return "GET_FEATURES";
    case UBLK_U_CMD_UPDATE_SIZE:
      return "UPDATE_SIZE";
    default:
      return "command";
    }
}

static gboolean
control_or_fail (guint32 op, guint32 dev_id, void *buf, guint16 len, guint64 data0, GError **error)
{
  int r = vb_ublk_control (op, dev_id, buf, len, data0);

  if (r < 0)
    {
      g_set_error (error, VB_ERROR, r == -EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED,
                   _ ("ublk %s (device %u): %s"), op_name (op), dev_id, g_strerror (-r));
      return FALSE;
    }
  return TRUE;
}

/* The device info's tag: magic and instance in ublksrv_flags (the
 * server's own word), the UUID in the two reserved words after it. */
static void
tag_info (struct ublksrv_ctrl_dev_info *info, const char *instance, const char *uuid)
{
  guint8 bytes[16] = { 0 };
  guint n = 0;

  for (const char *p = uuid; *p && n < 32; p++)
    if (g_ascii_isxdigit (*p))
      {
        bytes[n / 2] |= (guint8) (g_ascii_xdigit_value (*p) << (n % 2 ? 0 : 4));
        n++;
      }
  info->ublksrv_flags
      = ((guint64) TAG_MAGIC << 32) | (g_ascii_strtoull (instance, NULL, 16) & G_MAXUINT32);
  memcpy (&info->reserved1, bytes, 8);
  memcpy (&info->reserved2, bytes + 8, 8);
}

static gboolean
info_is (const struct ublksrv_ctrl_dev_info *info, const char *instance, const char *uuid)
{
  struct ublksrv_ctrl_dev_info want = { 0 };

  tag_info (&want, instance, uuid);
  return info->ublksrv_flags == want.ublksrv_flags && info->reserved1 == want.reserved1
         && info->reserved2 == want.reserved2;
}

/* The UUID in the tag of @info, or NULL when @info is not of @instance. */
static char *
info_uuid (const struct ublksrv_ctrl_dev_info *info, const char *instance)
{
  guint8 b[16];

  if (info->ublksrv_flags
      != (((guint64) TAG_MAGIC << 32) | (g_ascii_strtoull (instance, NULL, 16) & G_MAXUINT32)))
    return NULL;
  memcpy (b, &info->reserved1, 8);
  memcpy (b + 8, &info->reserved2, 8);
  return g_strdup_printf ("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                          b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                          b[12], b[13], b[14], b[15]);
}

/* ---- the backend ---- */

typedef struct {
  VbUblkDevice *dev;
  guint dev_id;
  guint64 flags; /* the device's (ADD_DEV's, as the driver took them) */
} UblkTransport;

/* Stops the driver's device (its queue threads end), then deletes it. */
static void
remove_device (guint dev_id, VbUblkDevice *dev)
{
  int r = vb_ublk_control (UBLK_CMD_STOP_DEV, dev_id, NULL, 0, 0);

  if (r < 0)
    vb_report ("ublk", VB_REPORT_WARNING, "STOP_DEV (device %u): %s", dev_id, g_strerror (-r));
  /* the threads and /dev/ublkcN go before DEL_DEV, which waits for them */
  vb_ublk_device_free (dev);
  r = vb_ublk_control (UBLK_CMD_DEL_DEV, dev_id, NULL, 0, 0);
  if (r < 0)
    vb_report ("ublk", VB_REPORT_WARNING, "DEL_DEV (device %u): %s", dev_id, g_strerror (-r));
}

static void
transport_free (UblkTransport *t)
{
  vb_ublk_device_free (t->dev);
  g_free (t);
}

static char *
node_of (guint dev_id)
{
  return g_strdup_printf ("/dev/ublkb%u", dev_id);
}

/* The device id in "/dev/ublkbN", or -1. */
static gint
id_of (const char *block_device)
{
  gint64 id;
  char *end;

  if (!g_str_has_prefix (block_device, "/dev/ublkb"))
    return -1;
  id = g_ascii_strtoll (block_device + strlen ("/dev/ublkb"), &end, 10);
  return *end == '\0' && end != block_device + strlen ("/dev/ublkb") && id >= 0 && id < G_MAXINT
             ? (gint) id
             : -1;
}

/* Every ublk device the driver has, by id. */
static GArray *
device_ids (void)
{
  GArray *ids = g_array_new (FALSE, FALSE, sizeof (guint));
  g_autoptr (GDir) dir = g_dir_open ("/sys/class/ublk-char", 0, NULL);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    {
      char *end;
      guint64 id;
      if (!g_str_has_prefix (entry, "ublkc"))
        continue;
      id = g_ascii_strtoull (entry + 5, &end, 10);
      if (*end == '\0' && end != entry + 5 && id < G_MAXUINT32)
        {
          guint v = (guint) id;
          g_array_append_val (ids, v);
        }
    }
  return ids;
}

/* A device of @instance, @uuid left by a vblkd that ended: its id, or -1. */
static gint
find_left_behind (const char *instance, const char *uuid)
{
  g_autoptr (GArray) ids = device_ids ();

  for (guint i = 0; i < ids->len; i++)
    {
      guint id = g_array_index (ids, guint, i);
      struct ublksrv_ctrl_dev_info info = { 0 };
      g_autofree char *node = node_of (id);
      if (vb_ublk_control (UBLK_CMD_GET_DEV_INFO, id, &info, sizeof info, 0) == 0
          && info_is (&info, instance, uuid) && vb_engine_runtime_lookup (node) == NULL)
        return (gint) id;
    }
  return -1;
}

static UblkTransport *
transport_new (VbEngineRuntime *rt, guint dev_id, guint64 flags)
{
  UblkTransport *t = g_new0 (UblkTransport, 1);

  t->dev_id = dev_id;
  t->flags = flags;
  rt->transport = t;
  rt->transport_free = (GDestroyNotify) transport_free;
  return t;
}

/* Linux 6.1's ublk takes parameters only before START_DEV; from 6.16 a
 * device added with UBLK_F_UPDATE_SIZE takes a new size at any time (here
 * only a larger one: ublk_reconfigure refuses the rest). */
static gboolean
announce_size (VbEngineRuntime *rt, GError **error)
{
  UblkTransport *t = rt->transport;

  if (!(t->flags & UBLK_F_UPDATE_SIZE))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("%s: the ublk driver cannot change the size of a started device"),
                   rt->block_device);
      return FALSE;
    }
  return control_or_fail (UBLK_U_CMD_UPDATE_SIZE, t->dev_id, NULL, 0,
                          vb_engine_switch_ops.size (rt->sw) >> 9, error);
}

/* Takes over ublk device @id that a vblkd which ended left quiesced. */
static char *
take_over (const VbBackendRequest *request, guint id, GError **error)
{
  g_autofree char *node = node_of (id);
  struct ublksrv_ctrl_dev_info info = { 0 };
  gint64 deadline = g_get_monotonic_time () + (gint64) RECOVERY_WAIT_MS * 1000;
  VbEngineRuntime *rt;
  UblkTransport *t;
  int r;

  /* the driver quiesces the device once it has seen its server die, and
   * lets go of /dev/ublkcN once the dead process's ring is gone */
  for (;;)
    {
      r = vb_ublk_control (UBLK_CMD_GET_DEV_INFO, id, &info, sizeof info, 0);
      if (r == 0 && info.state == UBLK_S_DEV_QUIESCED)
        r = vb_ublk_control (UBLK_CMD_START_USER_RECOVERY, id, NULL, 0, 0);
      else if (r == 0)
        r = -EBUSY;
      if (r != -EBUSY || g_get_monotonic_time () > deadline)
        break;
      g_usleep (100000);
    }
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("taking over %s: START_USER_RECOVERY: %s (device state %u)"), node,
                   g_strerror (-r), info.state);
      return NULL;
    }
  /* the queues are laid out as this build lays them out, or not touched
   * (a device another build added stays quiesced for that build) */
  if (info.nr_hw_queues == 0 || info.nr_hw_queues > MAX_QUEUES || info.queue_depth != QUEUE_DEPTH
      || info.max_io_buf_bytes != IO_BUF_BYTES)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("taking over %s: its %u queues of depth %u and %u-byte buffers are not this "
                      "vblkd's (at most %u queues of depth %u, %u-byte buffers)"),
                   node, info.nr_hw_queues, info.queue_depth, info.max_io_buf_bytes, MAX_QUEUES,
                   QUEUE_DEPTH, IO_BUF_BYTES);
      return NULL;
    }
  rt = vb_engine_runtime_new (request, error);
  if (rt == NULL)
    return NULL;
  rt->announce_size = announce_size;
  rt->zero_copy = (info.flags & UBLK_F_AUTO_BUF_REG) != 0;
  if (rt->zero_copy && !vb_engine_zero_copy_ok (vb_engine_switch_engine (rt->sw)))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                   _ ("taking over %s: it was added with zero copy, and a component is now one "
                      "this vblkd serves in place, which needs the data in memory"),
                   node);
      vb_engine_runtime_free (rt);
      return NULL;
    }
  t = transport_new (rt, id, info.flags);
  t->dev = vb_ublk_device_open (id, info.nr_hw_queues, info.flags, rt->sw, error);
  if (!vb_ublk_device_opened (t->dev)
      || !control_or_fail (UBLK_CMD_END_USER_RECOVERY, id, NULL, 0, (guint64) getpid (), error))
    {
      /* the device stays quiesced for another try */
      g_prefix_error (error, _ ("taking over %s: "), node);
      vb_engine_runtime_free (rt);
      return NULL;
    }
  vb_report (request->name, VB_REPORT_INFO,
             "took over %s (left by the vblkd that ended) with %u queue%s", node, info.nr_hw_queues,
             info.nr_hw_queues == 1 ? "" : "s");
  vb_engine_runtime_register (rt, node);
  return g_steal_pointer (&node);
}

#define KERNEL_ENOTSUPP 524 /* include/linux/errno.h */

/* The driver's features, and what they are said once a process (an
 * administrator reading why a size cannot change wants to know). */
static gboolean
driver_features (guint64 *features)
{
  static gboolean said;
  int r = vb_ublk_features (features);

  if (!said)
    {
      /* (a driver before 6.5 does not know the command: 6.1's takes it for
       * one about a device and finds none with id -1, ENODEV; others answer
       * with the kernel's own ENOTSUPP, which user space has no name for) */
      if (r == -ENODEV || r == -EOPNOTSUPP || r == -EINVAL || r == -ENOTTY || r == -KERNEL_ENOTSUPP)
        vb_report ("ublk", VB_REPORT_INFO,
                   "the ublk driver does not tell its features (before Linux 6.5: %s): "
                   "those of Linux 6.1 are used",
                   g_strerror (-r));
      else if (r < 0)
        vb_report ("ublk", VB_REPORT_WARNING,
                   "asking the ublk driver for its features: %s; those of Linux 6.1 are used",
                   g_strerror (-r));
      else
        vb_report ("ublk", VB_REPORT_INFO, "the ublk driver's features: 0x%" G_GINT64_MODIFIER "x",
                   *features);
      said = TRUE;
    }
  return r == 0;
}

static char *
ublk_start (const VbBackendRequest *request, GError **error)
{
  gint left = find_left_behind (request->instance, request->uuid);
  struct ublksrv_ctrl_dev_info info = { 0 };
  VbUblkParams params = { 0 };
  VbEngineRuntime *rt;
  UblkTransport *t;
  guint64 features = 0;
  gboolean have_features;
  guint32 block_size;
  guint64 size;
  guint shift = 9;
  char *node;
  VbUdevWatch *watch = NULL;

  if (left >= 0)
    return take_over (request, (guint) left, error);
  rt = vb_engine_runtime_new (request, error);
  if (rt == NULL)
    return NULL;
  rt->announce_size = announce_size;
  block_size = vb_engine_switch_ops.block_size (rt->sw);
  size = vb_engine_switch_ops.size (rt->sw);
  while ((1u << shift) < block_size)
    shift++;

  info.nr_hw_queues = (guint16) CLAMP (g_get_num_processors (), 1, MAX_QUEUES);
  info.queue_depth = QUEUE_DEPTH;
  info.max_io_buf_bytes = IO_BUF_BYTES;
  info.dev_id = (guint32) -1;
  have_features = driver_features (&features);
  info.flags = UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE
               | (have_features ? features & (UBLK_F_UPDATE_SIZE | UBLK_F_CMD_IOCTL_ENCODE) : 0);
  /* zero copy where the driver registers the buffers itself, unless a
   * component needs the data in memory (one served in place) or the
   * environment asks for the copy (benchmarks compare the two) */
  if (have_features && (features & UBLK_F_AUTO_BUF_REG)
      && vb_engine_zero_copy_ok (vb_engine_switch_engine (rt->sw))
      && g_strcmp0 (g_getenv ("VBLK_UBLK_COPY"), "1") != 0)
    info.flags |= UBLK_F_AUTO_BUF_REG;
  tag_info (&info, request->instance, request->uuid);
  if (!control_or_fail (UBLK_CMD_ADD_DEV, (guint32) -1, &info, sizeof info, 0, error))
    {
      vb_engine_runtime_free (rt);
      return NULL;
    }
  if (!(info.flags & UBLK_F_USER_RECOVERY_REISSUE))
    vb_report (request->name, VB_REPORT_WARNING,
               "this ublk driver cannot reissue requests after a vblkd restart");
  t = transport_new (rt, info.dev_id, info.flags);
  rt->zero_copy = (info.flags & UBLK_F_AUTO_BUF_REG) != 0;
  vb_report (request->name, VB_REPORT_INFO, "ublk device %u: %s", info.dev_id,
             rt->zero_copy ? "zero copy (the driver registers each request's buffer)"
                           : "the driver copies to and from vblkd's buffers");

  params.len = sizeof params;
  params.types = UBLK_PARAM_TYPE_BASIC;
  params.basic.attrs = UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA
                       | (vb_engine_switch_ops.read_only (rt->sw) ? UBLK_ATTR_READ_ONLY : 0);
  params.basic.logical_bs_shift = (guint8) shift;
  params.basic.physical_bs_shift = (guint8) shift;
  params.basic.io_min_shift = (guint8) shift;
  params.basic.io_opt_shift = (guint8) shift;
  params.basic.max_sectors = info.max_io_buf_bytes >> 9;
  params.basic.dev_sectors = size >> 9;
  if (vb_engine_switch_ops.discard)
    {
      params.types |= UBLK_PARAM_TYPE_DISCARD;
      params.discard.discard_granularity = block_size;
      params.discard.max_discard_sectors = G_MAXUINT32 >> 9;
      params.discard.max_write_zeroes_sectors = G_MAXUINT32 >> 9;
      params.discard.max_discard_segments = 1;
    }
  if (rt->zero_copy)
    {
      /* the request's own pages go to the components, O_DIRECT among
       * them: each segment aligned to the block size, as a copy into
       * vblkd's buffers would be */
      params.types |= UBLK_PARAM_TYPE_DMA_ALIGN;
      params.dma_alignment = MAX (block_size, 512u) - 1;
    }
  if (!control_or_fail (UBLK_CMD_SET_PARAMS, info.dev_id, &params, params.len, 0, error))
    goto fail;
  t->dev = vb_ublk_device_open (info.dev_id, info.nr_hw_queues, info.flags, rt->sw, error);
  if (!vb_ublk_device_opened (t->dev))
    goto fail;
  node = node_of (info.dev_id);
  watch = vb_udev_watch_begin ();
  if (!control_or_fail (UBLK_CMD_START_DEV, info.dev_id, NULL, 0, (guint64) getpid (), error))
    {
      g_free (node);
      goto fail;
    }
  /* the disk's add event, once udev has processed it */
  vb_udev_watch_end (watch, vb_devnum_of (node), "add");
  vb_engine_runtime_register (rt, node);
  return node;

fail:
  vb_udev_watch_end (watch, 0, NULL);
  remove_device (t->dev_id, g_steal_pointer (&t->dev));
  vb_engine_runtime_free (rt);
  return NULL;
}

static gboolean
ublk_stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  gint id = id_of (block_device);
  struct ublksrv_ctrl_dev_info info = { 0 };
  VbEngineRuntime *rt;
  VbUblkDevice *dev = NULL;
  int r;

  if (id < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("%s is not a ublk node"), block_device);
      return FALSE;
    }
  r = vb_ublk_control (UBLK_CMD_GET_DEV_INFO, (guint) id, &info, sizeof info, 0);
  if (r == -ENODEV)
    {
      vb_engine_runtime_free (vb_engine_runtime_unregister (block_device));
      return TRUE; /* already gone */
    }
  if (r < 0 || !info_is (&info, instance, uuid))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   _ ("%s now belongs to another device or program (%s), not removing it"),
                   block_device, r < 0 ? g_strerror (-r) : "its tag differs");
      return FALSE;
    }
  rt = vb_engine_runtime_unregister (block_device);
  if (rt)
    dev = g_steal_pointer (&((UblkTransport *) rt->transport)->dev);
  /* STOP_DEV lets the requests in flight finish (the queue threads go on
   * until the driver aborts their tags), then the device goes */
  remove_device ((guint) id, dev);
  vb_engine_runtime_free (rt);
  return TRUE;
}

static gboolean
ublk_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  return vb_engine_runtime_update (block_device, request, error);
}

static gboolean
ublk_reconfigure (const char *block_device, const VbBackendRequest *request, guint timeout_ms,
                  VbReconfigureReport *report, GError **error)
{
  VbEngineRuntime *rt = vb_engine_runtime_lookup (block_device);
  g_autoptr (GHashTable) attributes
      = vb_driver_resolve_attributes (request->driver, NULL, request->attributes, NULL);

  memset (report, 0, sizeof *report);
  if (rt && attributes)
    {
      guint64 now = vb_engine_switch_ops.size (rt->sw);
      guint64 size = request->driver->size (attributes, request->components, request->n_components);
      UblkTransport *t = rt->transport;
      /* growing is told after the swap (nothing is asked past the old end
       * before); shrinking would have to be told before, and is not done */
      if (size < now || (size > now && !(t->flags & UBLK_F_UPDATE_SIZE)))
        {
          g_set_error (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED,
                       _ ("%s: the ublk driver cannot %s a started device (%" PRIu64
                          " bytes); stop it to reconfigure, or use backend nbd"),
                       block_device, size < now ? "shrink" : "grow", now);
          return FALSE;
        }
    }
  return vb_engine_runtime_reconfigure (block_device, request, timeout_ms, report, error);
}

static GPtrArray *
ublk_scan (const char *instance, GError **error)
{
  g_autoptr (GPtrArray) found
      = g_ptr_array_new_with_free_func ((GDestroyNotify) vb_backend_instance_free);
  g_autoptr (GArray) ids = device_ids ();

  for (guint i = 0; i < ids->len; i++)
    {
      guint id = g_array_index (ids, guint, i);
      struct ublksrv_ctrl_dev_info info = { 0 };
      g_autofree char *uuid = NULL;
      VbBackendInstance *node;

      if (vb_ublk_control (UBLK_CMD_GET_DEV_INFO, id, &info, sizeof info, 0) != 0
          || (uuid = info_uuid (&info, instance)) == NULL)
        continue;
      node = g_new0 (VbBackendInstance, 1);
      node->uuid = g_steal_pointer (&uuid);
      node->block_device = node_of (id);
      node->left_behind = vb_engine_runtime_lookup (node->block_device) == NULL;
      if (node->left_behind && info.state == UBLK_S_DEV_DEAD)
        {
          /* added, never started (a vblkd killed half way): nothing uses it */
          remove_device (id, NULL);
          vb_backend_instance_free (node);
          continue;
        }
      node->backing
          = g_strdup (node->left_behind ? "queues of a vblkd that ended (start takes it over)"
                                        : "the engine over ublk");
      g_ptr_array_add (found, node);
    }
  return g_steal_pointer (&found);
}

/* The tag in the device info of /dev/ublkbN, whichever instance left it. */
static gboolean
ublk_node_owner (dev_t devnum, VbNodeOwner *owner)
{
  g_autofree char *node = vb_node_of_devnum (devnum);
  struct ublksrv_ctrl_dev_info info = { 0 };
  g_autofree char *instance = NULL;
  char *end;
  guint64 id;

  if (node == NULL || !g_str_has_prefix (node, "/dev/ublkb"))
    return FALSE;
  id = g_ascii_strtoull (node + strlen ("/dev/ublkb"), &end, 10);
  if (*end != '\0' || id > G_MAXUINT32
      || vb_ublk_control (UBLK_CMD_GET_DEV_INFO, (guint) id, &info, sizeof info, 0) != 0
      || (info.ublksrv_flags >> 32) != TAG_MAGIC)
    return FALSE;
  instance = g_strdup_printf ("%08x", (guint) (info.ublksrv_flags & G_MAXUINT32));
  owner->uuid = info_uuid (&info, instance);
  owner->instance = g_steal_pointer (&instance);
  return owner->uuid != NULL;
}

const VbBackend vb_backend_ublk = {
  .name = "ublk",
  .capabilities = VB_ENGINE_RUNTIME_CAPABILITIES | VB_BACKEND_SURVIVES_SERVER,
  .available = ublk_available,
  .supports = vb_engine_runtime_supports,
  .start = ublk_start,
  .stop = ublk_stop,
  .update = ublk_update,
  .reconfigure = ublk_reconfigure,
  .scan = ublk_scan,
  .node_owner = ublk_node_owner,
  .format = vb_engine_runtime_format,
  .engine = &vb_engine_runtime_ops,
};
