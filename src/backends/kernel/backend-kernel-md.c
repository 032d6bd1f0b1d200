/* Backend "kernel", its md part: raid0, raid1 and raid10 as in-kernel md
 * arrays, configured through sysfs alone, with vblk's own superblocks as
 * the array's external metadata ("external:vblk"): md keeps nothing on the
 * components, and vblkd plays the part mdmon plays for mdadm's external
 * formats.
 *
 *  - Start: the superblocks are read and the array assembled the way the
 *    engine assembles it (the newest superblock's role table; a stale or
 *    new component is recovered by md in full; a missing one leaves the
 *    array degraded), the superblocks are marked dirty, then
 *    new_array, metadata_version, level, chunk_size, layout, raid_disks,
 *    resync_start, and for each component new_dev, dev-X/offset, size,
 *    state=insync or recovery_start, slot; array_state=active.
 *  - The monitor thread (one per array) waits on md's sysfs attributes
 *    (poll POLLPRI) and answers them: a component md marks faulty and
 *    blocked is recorded as faulty in the surviving superblocks, then
 *    unblocked, then removed (md holds the writes to it until then, so no
 *    write is acknowledged that the metadata does not account for);
 *    array_state write-pending is answered by marking the superblocks
 *    dirty, then active; active-idle by clean, and once md says clean with
 *    no resync pending the superblocks say clean. A recovered component
 *    becomes in-sync in them. md's resync, recovery, check and repair are
 *    reported as jobs; a spare replaces a removed component.
 *  - Stop: array_state=clear, then the superblocks say clean if md had
 *    nothing left to resync.
 *
 * An mdadm array (metadata=md1) runs with md's own superblocks instead:
 * metadata_version 1.x and new_dev for each member (md reads the roles
 * and offsets from the superblocks), and md writes them itself on a
 * failure, recovery or re-add, as with mdadm. The monitor then leaves
 * array_state and a failed member's "blocked" to md (md clears it once
 * its superblocks record the failure) and only reports, removes, takes
 * spares (a blank one gets its first superblock from a member's, as
 * mdadm --add does) and follows the jobs.
 *
 * md has no bitmap for metadata it does not know, so vblk's bitmap area is
 * marked all dirty while md runs the array (a crash resyncs every chunk,
 * on either backend) and cleared by a clean stop.
 *
 * Names: the array is "md_vbINSTANCE_" and the first 16 hex digits of the
 * device UUID (md allows 31 characters), its node /dev/md_vb…; the full
 * UUID and name are kept in RUN_DIR/md/ARRAY for a vblkd started again
 * while the array runs (md arrays outlive vblkd, as they outlive mdadm). */
#include "config.h"

#include "assembly.h"
#include "backend-kernel-private.h"
#include "loop-util.h"
#include "assembly.h"
#include "handler-md1.h"
#include "metadata.h"
#include "superblock.h"
#include "vb-error.h"
#include "vb-testhook.h"

#include <blockdev/loop.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define MD_NAME_PREFIX "md_vb"
#define MD_METADATA "external:vblk"
#define NEW_ARRAY "/sys/module/md_mod/parameters/new_array"
#define SECTOR 512
#define IDLE_TICK_MS 2000
#define JOB_TICK_MS 500
#define CLEAR_TRIES 50 /* × 100 ms: udev's probe may hold the node a moment */

typedef struct {
  char *path;  /* the component as the request names it */
  char *uuid;  /* its component UUID */
  char *node;  /* the block device md holds: the component or a loop over it */
  char *kname; /* its kernel name: md's dev-KNAME */
  dev_t devnum;
  int fd;              /* the node, O_DIRECT: superblocks; -1 */
  gboolean failed;     /* md marked it faulty; recorded */
  gboolean removed;    /* no longer in md */
  gboolean rebuilding; /* md recovers it */
} Member;

/* A slot as status calls see it. */
typedef struct {
  gboolean present;    /* a member is there (not missing at start) */
  gboolean healthy;    /* in md, in sync */
  gboolean faulty;     /* failed, recorded */
  gboolean rebuilding; /* md recovers it */
  char *errors;        /* its md attribute dev-KNAME/errors, or NULL */
} SlotStatus;

typedef struct {
  char *md;           /* "md_vb…" */
  char *block_device; /* "/dev/md_vb…" */
  char *sysdir;       /* /sys/block/MD/md */
  char *name, *uuid, *instance, *driver;
  guint n;                 /* slots */
  guint copies;            /* of every chunk: raid1 n, raid10 its copies, raid0 1 */
  gboolean meta;           /* vblk superblocks on the components */
  gboolean native;         /* md1: md's own superblocks, which md keeps */
  char *md_version;        /* native: "1.2" */
  guint32 next_dev_number; /* native: above every role-table entry handed to a spare */
  gboolean read_only;
  gint refs;   /* the table's, and each caller's between lookup_array and array_unref */
  GMutex lock; /* the members and superblocks; held across their I/O */
  /* what status calls from the main thread read, never held across I/O
   * (publish_status_locked copies it from the members) */
  GMutex status_lock;
  SlotStatus *status;
  VbSuperblock sb;  /* meta: the role table, events, clean */
  Member **members; /* per slot; NULL: nothing there */
  GPtrArray *spare_paths, *spare_uuids;
  GThread *thread;
  int wake; /* eventfd */
  gboolean stopping;
  /* the job md runs, as reported */
  guint64 job_id;
  char *job_op;
  gint job_slot;
  char *job_component;
  guint64 job_bytes, job_done;
  gboolean job_seen, job_cancel;
  gint64 job_asked; /* µs: check/repair asked, md not seen running it yet */
} MdArray;

static GMutex arrays_lock;
static GHashTable *arrays; /* block_device -> MdArray* */
/* apart from the engine's job ids, which count from 1 */
static guint64 next_job_id = G_GUINT64_CONSTANT (1) << 40;

gboolean
vb_kernel_md_available (char **reason)
{
  if (access (NEW_ARRAY, W_OK) != 0)
    {
      *reason = g_strdup ("no md (" NEW_ARRAY "; kernel module md-mod not loaded)");
      return FALSE;
    }
  return TRUE;
}

gboolean
vb_kernel_md_is_node (const char *block_device)
{
  return g_str_has_prefix (block_device, "/dev/" MD_NAME_PREFIX);
}

gboolean
vb_kernel_md_node_owner (const char *node, VbNodeOwner *owner)
{
  const char *rest, *sep;

  if (!vb_kernel_md_is_node (node))
    return FALSE;
  rest = node + strlen ("/dev/" MD_NAME_PREFIX);
  sep = strchr (rest, '_');
  if (sep == NULL || sep == rest || sep[1] == '\0')
    return FALSE;
  owner->instance = g_strndup (rest, sep - rest);
  owner->uuid = g_strdup (sep + 1);
  return TRUE;
}

static char *
md_name (const char *instance, const char *uuid)
{
  GString *s = g_string_new (MD_NAME_PREFIX);
  guint digits = 0;

  g_string_append_printf (s, "%s_", instance);
  for (const char *p = uuid; *p && digits < 16; p++)
    if (g_ascii_isxdigit (*p))
      {
        g_string_append_c (s, g_ascii_tolower (*p));
        digits++;
      }
  return g_string_free (s, FALSE);
}

static char *
run_file (const char *md)
{
  return g_build_filename (vb_backends_run_dir (), "md", md, NULL);
}

/* ---- sysfs ---- */

static int
sys_write (const char *path, const char *value)
{
  int fd = open (path, O_WRONLY | O_CLOEXEC);
  int e = 0;

  if (fd < 0)
    return -errno;
  if (write (fd, value, strlen (value)) < 0)
    e = errno;
  close (fd);
  return -e;
}

static char *
sys_read (const char *path)
{
  char *text = NULL;

  if (!g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  return g_strstrip (text);
}

static int
md_set (MdArray *a, const char *attr, const char *value)
{
  g_autofree char *path = g_build_filename (a->sysdir, attr, NULL);
  int r = sys_write (path, value);

  if (r < 0)
    g_debug ("%s: %s = %s: %s", a->md, attr, value, g_strerror (-r));
  return r;
}

static int
md_set_u64 (MdArray *a, const char *attr, guint64 value)
{
  g_autofree char *text = g_strdup_printf ("%" G_GUINT64_FORMAT, value);
  return md_set (a, attr, text);
}

static char *
md_get (MdArray *a, const char *attr)
{
  g_autofree char *path = g_build_filename (a->sysdir, attr, NULL);
  return sys_read (path);
}

static char *
dev_attr (const Member *m, const char *attr)
{
  return g_strdup_printf ("dev-%s/%s", m->kname, attr);
}

static gboolean
has_word (const char *list, const char *word)
{
  g_auto (GStrv) words = list ? g_strsplit (list, ",", -1) : NULL;

  for (guint i = 0; words && words[i]; i++)
    if (strcmp (g_strstrip (words[i]), word) == 0)
      return TRUE;
  return FALSE;
}

/* ---- members ---- */

static void
member_free (Member *m)
{
  if (m == NULL)
    return;
  if (m->fd >= 0)
    close (m->fd);
  g_free (m->path);
  g_free (m->uuid);
  g_free (m->node);
  g_free (m->kname);
  g_free (m);
}

/* The kernel name and number of block device @node. */
static gboolean
node_identity (const char *node, char **kname, dev_t *devnum, GError **error)
{
  struct stat st;
  g_autofree char *link = NULL, *target = NULL;

  if (stat (node, &st) != 0 || !S_ISBLK (st.st_mode))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "'%s' is not a block device", node);
      return FALSE;
    }
  link = g_strdup_printf ("/sys/dev/block/%u:%u", major (st.st_rdev), minor (st.st_rdev));
  target = g_file_read_link (link, NULL);
  if (target == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "'%s': no %s", node, link);
      return FALSE;
    }
  *kname = g_path_get_basename (target);
  *devnum = st.st_rdev;
  return TRUE;
}

static Member *
member_new (const char *path, const char *uuid, const char *node, gboolean meta, GError **error)
{
  Member *m = g_new0 (Member, 1);

  m->fd = -1;
  m->path = g_strdup (path);
  m->uuid = g_strdup (uuid);
  m->node = g_strdup (node);
  if (!node_identity (node, &m->kname, &m->devnum, error))
    {
      member_free (m);
      return NULL;
    }
  /* superblocks go through the node md uses, so that they and md's
   * writes share one path to the file */
  if (meta && (m->fd = open (node, O_RDWR | O_DIRECT | O_CLOEXEC)) < 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "component '%s' (%s): %s", path, node,
                   g_strerror (e));
      member_free (m);
      return NULL;
    }
  return m;
}

/* ---- metadata ---- */

static void member_gone_locked (MdArray *a, guint slot, gboolean take_spare);

/* The current superblock to every member that has not failed, events
 * counted up. FALSE when no member took it. Called with a->lock held. */
static gboolean
write_all_locked (MdArray *a)
{
  guint written = 0;

  if (!a->meta)
    return TRUE;
  a->sb.events++;
  a->sb.utime = g_get_real_time ();
  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autoptr (GError) local = NULL;
      VbSuperblock one;
      if (m == NULL || m->fd < 0 || m->failed)
        continue;
      one = a->sb;
      g_strlcpy (one.component_uuid, m->uuid, sizeof one.component_uuid);
      one.role = (gint32) i;
      if (vb_superblock_write (m->fd, m->path, &one, &local))
        written++;
      else
        g_warning ("%s: %s", a->name, local->message);
    }
  return written > 0;
}

/* vblk's bitmap area of @m: every bit set (md runs the array and keeps no
 * vblk bitmap) or clear (stopped clean, every copy equal). */
static void
write_bitmap (MdArray *a, Member *m, gboolean dirty)
{
  void *buf = NULL;
  gsize len = a->sb.bitmap_bytes;

  if (!(a->sb.features & VB_SB_FEATURE_BITMAP) || len == 0 || m == NULL || m->fd < 0 || m->failed)
    return;
  if (posix_memalign (&buf, 4096, len) != 0)
    return;
  memset (buf, dirty ? 0xff : 0, len);
  if (pwrite (m->fd, buf, len, VB_BITMAP_OFFSET) != (ssize_t) len || fdatasync (m->fd) != 0)
    g_warning ("%s: writing the bitmap of '%s': %s", a->name, m->path, g_strerror (errno));
  free (buf);
}

/* The newest superblock's role table and the assembly rule (assembly.h)
 * decide, as on the engine: a member with the table's events in an in-sync
 * role is in sync; a faulty one stays out of md until it is re-added; any
 * other member is recovered in full (md has no bitmap of vblk's). */
/* raid0: md has no copy to recover a member from, so every slot must hold
 * its own, current component — the rules of every device with one copy
 * of its data, the engine's too (vb_assembly_single_copy). */
static gboolean
assemble_single_copy (MdArray *a, const VbBackendRequest *request, const VbSuperblock *found,
                      const gboolean *present, GError **error)
{
  g_autofree VbAssemblySlot *slots = g_new0 (VbAssemblySlot, a->n);

  for (guint i = 0; i < a->n; i++)
    {
      slots[i].path = a->members[i] ? a->members[i]->path : request->components[i].source;
      slots[i].missing = a->members[i] == NULL;
      slots[i].sb = present[i] ? &found[i] : NULL;
    }
  if (!vb_assembly_single_copy (a->name, &a->sb, slots, a->n, FALSE, error))
    return FALSE;
  for (guint i = 0; i < a->n; i++)
    {
      g_free (a->members[i]->uuid);
      a->members[i]->uuid = g_strdup (found[i].component_uuid);
    }
  return TRUE;
}

/* The newest superblock's role table decides: a member with the table's
 * events in an in-sync role is in sync; any other member is recovered in
 * full (md has no bitmap of vblk's). */
static gboolean
assemble (MdArray *a, const VbBackendRequest *request, const VbLayout *layout, GError **error)
{
  g_autofree VbSuperblock *found = g_new0 (VbSuperblock, a->n);
  g_autofree gboolean *present = g_new0 (gboolean, a->n);
  gint best = -1;
  guint in_sync = 0;

  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autoptr (GError) local = NULL;
      if (m == NULL)
        continue;
      if (!vb_superblock_read (m->fd, m->path, &found[i], &local))
        {
          if (g_error_matches (local, VB_ERROR, VB_ERROR_NOT_FOUND))
            continue; /* blank: a new component */
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       "%s; refusing to start (nothing was written)", local->message);
          return FALSE;
        }
      if (strcmp (found[i].device_uuid, a->uuid) != 0)
        {
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       "component '%s' belongs to device '%s' (%s), not to '%s' (%s); refusing "
                       "to start (nothing was written)",
                       m->path, found[i].device_name, found[i].device_uuid, a->name, a->uuid);
          return FALSE;
        }
      present[i] = TRUE;
      if (best < 0 || found[i].events > found[best].events)
        best = i;
    }
  /* two components claiming one role with equal events: which holds the
   * data cannot be told */
  for (guint i = 0; i < a->n; i++)
    for (guint j = i + 1; j < a->n; j++)
      if (present[i] && present[j] && found[i].role == found[j].role && found[i].role >= 0
          && found[i].events == found[j].events
          && strcmp (found[i].component_uuid, found[j].component_uuid) != 0)
        {
          g_set_error (
              error, VB_ERROR, VB_ERROR_FAILED,
              "components '%s' and '%s' both claim role %d of '%s' at events %" G_GUINT64_FORMAT
              "; refusing to start (nothing was written)",
              a->members[i]->path, a->members[j]->path, found[i].role, a->name, found[i].events);
          return FALSE;
        }
  if (best < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "device '%s': no component holds a vblk superblock of it; refusing to start",
                   a->name);
      return FALSE;
    }
  if (found[best].n_roles != a->n)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "component '%s': its superblock says %u slots, the device has %u; refusing to "
                   "start (nothing was written)",
                   a->members[best]->path, found[best].n_roles, a->n);
      return FALSE;
    }
  if (layout->component_size < found[best].data_size)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "device '%s' holds %" G_GUINT64_FORMAT " bytes of data per component, its "
                   "components now give %" G_GUINT64_FORMAT "; refusing to start (nothing was "
                   "written)",
                   a->name, found[best].data_size, layout->component_size);
      return FALSE;
    }
  a->sb = found[best];
  g_strlcpy (a->sb.format, "vblk", sizeof a->sb.format);
  g_strlcpy (a->sb.device_name, a->name, sizeof a->sb.device_name);
  vb_superblock_set_attributes (&a->sb, request->attributes);
  if (a->copies == 1)
    return assemble_single_copy (a, request, found, present, error);

  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autofree char *why = NULL;
      /* md keeps no vblk bitmap: whatever is behind is recovered in full */
      VbSlotFacts facts = {
        .device = &a->sb,
        .slot = i,
        .present = m != NULL,
        .own = present[i] ? &found[i] : NULL,
        .newest = found[best].component_uuid,
        .use_bitmap = FALSE,
      };
      VbSlotDecision d = vb_assembly_decide (&facts, &why);

      switch (d)
        {
        case VB_SLOT_MISSING:
          if (a->sb.roles[i].state == VB_ROLE_IN_SYNC)
            a->sb.roles[i].state = VB_ROLE_MISSING;
          g_message ("%s: component %u is missing; starting degraded", a->name, i);
          continue;
        case VB_SLOT_CURRENT:
          g_free (m->uuid);
          m->uuid = g_strdup (found[i].component_uuid);
          in_sync++;
          continue;
        case VB_SLOT_FAULTY:
          /* kept out of md, shown faulty, until an explicit re-add */
          g_message ("%s: component %u (%s): %s", a->name, i, m->path, why);
          g_free (m->uuid);
          m->uuid = g_strdup (found[i].component_uuid);
          m->failed = TRUE;
          member_gone_locked (a, i, FALSE);
          continue;
        case VB_SLOT_RESYNC:
        case VB_SLOT_RESUME:
        case VB_SLOT_REBUILD:
          break;
        }
      g_message ("%s: component %u (%s): %s; md recovers it in full", a->name, i, m->path, why);
      if (present[i] && strcmp (found[i].component_uuid, a->sb.roles[i].uuid) == 0)
        {
          g_free (m->uuid);
          m->uuid = g_strdup (found[i].component_uuid);
        }
      m->rebuilding = TRUE;
      g_strlcpy (a->sb.roles[i].uuid, m->uuid, sizeof a->sb.roles[i].uuid);
      a->sb.roles[i].state = VB_ROLE_REBUILDING;
    }
  if (in_sync == 0)
    {
      g_set_error (
          error, VB_ERROR, VB_ERROR_FAILED,
          "device '%s': no component is in sync (the newest superblock, events %" G_GUINT64_FORMAT
          ", names none that is here); refusing to start",
          a->name, a->sb.events);
      return FALSE;
    }
  return TRUE;
}

/* ---- the array ---- */

static void
array_free (MdArray *a)
{
  for (guint i = 0; i < a->n; i++)
    member_free (a->members[i]);
  g_free (a->members);
  g_ptr_array_unref (a->spare_paths);
  g_ptr_array_unref (a->spare_uuids);
  if (a->wake >= 0)
    close (a->wake);
  g_mutex_clear (&a->lock);
  for (guint i = 0; i < a->n; i++)
    g_free (a->status[i].errors);
  g_free (a->status);
  g_mutex_clear (&a->status_lock);
  g_free (a->md);
  g_free (a->block_device);
  g_free (a->sysdir);
  g_free (a->name);
  g_free (a->uuid);
  g_free (a->instance);
  g_free (a->driver);
  g_free (a->md_version);
  g_free (a->job_op);
  g_free (a->job_component);
  g_free (a);
}

static void
array_unref (MdArray *a)
{
  if (a && g_atomic_int_dec_and_test (&a->refs))
    array_free (a);
}

G_DEFINE_AUTOPTR_CLEANUP_FUNC (MdArray, array_unref)

static MdArray *
array_new (const char *instance, const char *uuid, const char *name, const char *driver, guint n)
{
  MdArray *a = g_new0 (MdArray, 1);

  a->refs = 1;
  g_mutex_init (&a->lock);
  g_mutex_init (&a->status_lock);
  a->md = md_name (instance, uuid);
  a->block_device = g_strdup_printf ("/dev/%s", a->md);
  a->sysdir = g_strdup_printf ("/sys/block/%s/md", a->md);
  a->instance = g_strdup (instance);
  a->uuid = g_strdup (uuid);
  a->name = g_strdup (name);
  a->driver = g_strdup (driver);
  a->n = n;
  a->copies = 1;
  a->members = g_new0 (Member *, n);
  a->status = g_new0 (SlotStatus, n);
  a->spare_paths = g_ptr_array_new_with_free_func (g_free);
  a->spare_uuids = g_ptr_array_new_with_free_func (g_free);
  a->wake = eventfd (0, EFD_CLOEXEC | EFD_NONBLOCK);
  a->job_slot = -1;
  return a;
}

static void
wake (MdArray *a)
{
  guint64 one = 1;
  if (write (a->wake, &one, sizeof one) < 0)
    g_debug ("%s: waking the monitor: %s", a->md, g_strerror (errno));
}

/* The slots holding a copy of every chunk, as a set per chunk row: md's
 * near layout puts chunk c's copies in slots c*copies .. c*copies+copies-1
 * (mod n), so n rows cover every placement. TRUE when every chunk keeps a
 * healthy copy with slot @without (-1: none) failed too. */
static gboolean
every_chunk_has_a_copy (MdArray *a, const gboolean *healthy, gint without)
{
  for (guint row = 0; row < a->n; row++)
    {
      gboolean copy = FALSE;
      for (guint k = 0; k < a->copies && !copy; k++)
        {
          guint slot = (row * a->copies + k) % a->n;
          copy = (gint) slot != without && healthy[slot];
        }
      if (!copy)
        return FALSE;
    }
  return TRUE;
}

static gboolean
member_healthy (const Member *m)
{
  return m && !m->failed && !m->removed && !m->rebuilding;
}

/* The members' state, for the status calls. Called with a->lock held. */
static void
publish_status_locked (MdArray *a)
{
  g_mutex_lock (&a->status_lock);
  for (guint i = 0; i < a->n; i++)
    {
      const Member *m = a->members[i];
      SlotStatus *st = &a->status[i];
      st->present = m != NULL;
      st->healthy = member_healthy (m);
      st->faulty = m && m->failed;
      st->rebuilding = m && m->rebuilding;
      g_free (st->errors);
      st->errors = m && !m->removed ? dev_attr (m, "errors") : NULL;
    }
  g_mutex_unlock (&a->status_lock);
}

/* The failure of slot @slot into the surviving superblocks. FALSE when no
 * survivor took the write: md is not let go on (tried again later). */
static gboolean
record_failure_locked (MdArray *a, guint slot, const char *why, gboolean requested)
{
  Member *m = a->members[slot];
  VbRoleState was = a->sb.roles[slot].state;

  m->failed = TRUE;
  if (a->meta)
    {
      a->sb.roles[slot].state = VB_ROLE_FAULTY;
      if (!write_all_locked (a))
        {
          g_warning ("%s: component %u (%s) %s, and no surviving superblock could record it; "
                     "md keeps holding it",
                     a->name, slot, m->path, why);
          a->sb.roles[slot].state = was;
          m->failed = FALSE;
          return FALSE;
        }
    }
  m->rebuilding = FALSE;
  if (a->meta)
    g_message ("%s: component %u (%s) %s; recorded as faulty (events %" G_GUINT64_FORMAT ")",
               a->name, slot, m->path, why, a->sb.events);
  else
    g_message ("%s: component %u (%s) %s%s", a->name, slot, m->path, why,
               a->native ? "; md records it in its superblocks" : "");
  vb_test_hook ("md:failure-recorded");
  /* seen faulty by whoever hears of it */
  publish_status_locked (a);
  /* as the engine reports them: negative, -ECANCELED for a request */
  vb_backends_report_failure (a->uuid, slot, requested ? -ECANCELED : -EIO);
  return TRUE;
}

/* md1: a component md can take as a spare carries a superblock of the
 * array; a blank one gets its first from an in-sync member's. */
static gboolean
native_superblock_ready_locked (MdArray *a, Member *m, GError **error)
{
  VbSuperblock sb;
  const Member *from = NULL;

  if (vb_metadata_md1.read (-1, m->node, &sb, NULL) && strcmp (sb.device_uuid, a->uuid) == 0)
    return TRUE; /* a member coming back: md re-adds it */
  for (guint i = 0; i < a->n && from == NULL; i++)
    if (a->members[i] && !a->members[i]->failed && !a->members[i]->removed
        && !a->members[i]->rebuilding)
      from = a->members[i];
  if (from == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "%s: no in-sync member to take a superblock for '%s' from", a->name, m->path);
      return FALSE;
    }
  if (!vb_md1_write_spare (from->node, a->md_version, m->node, m->uuid, a->next_dev_number,
                           &a->next_dev_number, error))
    return FALSE;
  g_message ("%s: '%s' got an md %s superblock as a spare of the array", a->name, m->path,
             a->md_version);
  return TRUE;
}

/* @path (UUID @uuid) into slot @slot of the running array: its superblock
 * written (rebuilding), then md adds it and recovers it. */
static gboolean
add_member_locked (MdArray *a, guint slot, const char *path, const char *uuid, GError **error)
{
  g_autofree char *tag = vb_kernel_loop_tag (a->instance, a->uuid);
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) attached = g_ptr_array_new_with_free_func (g_free);
  VbComponentInfo info = { .source = path };
  VbBackendRequest one
      = { .name = a->name, .n_components = 1, .paths = &path, .components = &info };
  struct stat st;
  Member *m;
  g_autofree char *dev = NULL, *offset = NULL, *size = NULL, *sslot = NULL;

  if (stat (path, &st) != 0)
    {
      int e = errno;
      g_set_error (error, VB_ERROR, e == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                   "component '%s': %s", path, g_strerror (e));
      return FALSE;
    }
  info.kind = S_ISBLK (st.st_mode) ? VB_COMPONENT_KIND_BLOCK : VB_COMPONENT_KIND_FILE;
  if (!vb_kernel_component_nodes (&one, tag, FALSE, nodes, attached, error))
    return FALSE;
  m = member_new (path, uuid, nodes->pdata[0], a->meta, error);
  if (m == NULL)
    {
      vb_kernel_detach_all (attached);
      return FALSE;
    }
  m->rebuilding = TRUE;
  if (a->native && !native_superblock_ready_locked (a, m, error))
    {
      member_free (m);
      vb_kernel_detach_all (attached);
      return FALSE;
    }
  if (a->meta)
    {
      g_autoptr (GError) local = NULL;
      VbSuperblock sb = a->sb;
      g_strlcpy (sb.component_uuid, uuid, sizeof sb.component_uuid);
      sb.role = (gint32) slot;
      sb.roles[slot].state = VB_ROLE_REBUILDING;
      g_strlcpy (sb.roles[slot].uuid, uuid, sizeof sb.roles[slot].uuid);
      if (!vb_superblock_write (m->fd, path, &sb, &local))
        {
          g_propagate_error (error, g_steal_pointer (&local));
          member_free (m);
          vb_kernel_detach_all (attached);
          return FALSE;
        }
    }
  dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
  offset = dev_attr (m, "offset");
  size = dev_attr (m, "size");
  sslot = dev_attr (m, "slot");
  int r = md_set (a, "new_dev", dev);
  /* md1: md takes offsets and size from the superblock and places the
   * spare itself */
  if (r == 0 && !a->native)
    r = md_set_u64 (a, offset, a->sb.data_offset / SECTOR);
  if (r == 0 && !a->native)
    r = md_set_u64 (a, size, a->sb.data_size / 1024);
  if (r == 0 && !a->native)
    r = md_set_u64 (a, sslot, slot);
  if (r < 0)
    {
      g_autofree char *state = dev_attr (m, "state");
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "md refused '%s' in slot %u of %s: %s", path,
                   slot, a->md, g_strerror (-r));
      md_set (a, state, "remove");
      member_free (m);
      vb_kernel_detach_all (attached);
      return FALSE;
    }
  member_free (a->members[slot]);
  a->members[slot] = m;
  if (a->meta)
    {
      g_strlcpy (a->sb.roles[slot].uuid, uuid, sizeof a->sb.roles[slot].uuid);
      a->sb.roles[slot].state = VB_ROLE_REBUILDING;
      write_all_locked (a);
      write_bitmap (a, m, TRUE);
    }
  md_set (a, "sync_action", "recover");
  g_message ("%s: '%s' added to slot %u of %s; md recovers it", a->name, path, slot, a->md);
  return TRUE;
}

/* A spare into slot @slot, whose component failed and left md. TRUE when
 * one took it. */
static gboolean
take_spare_locked (MdArray *a, guint slot)
{
  g_autofree char *action = NULL;
  g_autoptr (GError) local = NULL;
  Member *failed = a->members[slot];
  const char *path, *uuid;

  if (a->copies == 1 || a->spare_paths->len == 0)
    return FALSE;
  /* md places no member while a resync, recovery or check runs: the spare
   * waits for the next look */
  action = md_get (a, "sync_action");
  if (g_strcmp0 (action, "idle") != 0 && g_strcmp0 (action, "frozen") != 0)
    return FALSE;
  path = a->spare_paths->pdata[0];
  uuid = a->spare_uuids->pdata[0];
  a->members[slot] = NULL;
  if (!add_member_locked (a, slot, path, uuid, &local))
    {
      /* it stays a spare: tried again at the next look */
      a->members[slot] = failed;
      g_warning ("%s: spare '%s': %s", a->name, path, local->message);
      return FALSE;
    }
  g_message ("%s: spare '%s' takes slot %u", a->name, path, slot);
  g_ptr_array_remove_index (a->spare_paths, 0);
  g_ptr_array_remove_index (a->spare_uuids, 0);
  member_free (failed);
  return TRUE;
}

/* A member md removed: its file let go; a spare, if there is one, takes
 * its slot. */
static void
member_gone_locked (MdArray *a, guint slot, gboolean take_spare)
{
  Member *m = a->members[slot];
  g_autofree char *tag = vb_kernel_loop_tag (a->instance, a->uuid);
  g_autofree char *name = vb_loop_get_name (m->node);

  m->removed = TRUE;
  if (m->fd >= 0)
    {
      close (m->fd);
      m->fd = -1;
    }
  if (g_strcmp0 (name, tag) == 0)
    {
      g_autoptr (GError) local = NULL;
      if (!bd_loop_teardown (m->node, &local))
        g_warning ("%s: detaching %s: %s", a->name, m->node, local->message);
    }
  if (take_spare)
    take_spare_locked (a, slot);
}

/* ---- the monitor ---- */

/* Reads @attr and adds it to what the monitor waits on. */
static char *
watch (MdArray *a, const char *attr, GArray *pfds)
{
  g_autofree char *path = g_build_filename (a->sysdir, attr, NULL);
  char buf[256];
  struct pollfd pfd = { .events = POLLPRI | POLLERR };
  ssize_t len;

  pfd.fd = open (path, O_RDONLY | O_CLOEXEC);
  if (pfd.fd < 0)
    return NULL;
  len = read (pfd.fd, buf, sizeof buf - 1);
  if (len < 0)
    {
      close (pfd.fd);
      return NULL;
    }
  buf[len] = 0;
  g_array_append_val (pfds, pfd);
  return g_strstrip (g_strdup (buf));
}

static void
report_job_locked (MdArray *a, VbEngineJobState state)
{
  VbEngineJob job = {
    .id = a->job_id,
    .device = a->name,
    .operation = a->job_op,
    .state = state,
    .bytes = a->job_bytes,
    .done = a->job_done,
    .component = a->job_slot,
    .component_uuid = a->job_component,
  };

  if (state != VB_ENGINE_JOB_RUNNING
      && (strcmp (a->job_op, "check") == 0 || strcmp (a->job_op, "repair") == 0))
    {
      g_autofree char *count = md_get (a, "mismatch_cnt");
      /* md counts sectors, the engine 4 KiB blocks */
      job.mismatches = count ? g_ascii_strtoull (count, NULL, 10) / (4096 / SECTOR) : 0;
    }
  vb_backends_report_job (a->uuid, &job);
}

static void
end_job_locked (MdArray *a)
{
  if (a->job_op == NULL)
    return;
  if (!a->job_cancel)
    a->job_done = a->job_bytes;
  report_job_locked (a, a->job_cancel ? VB_ENGINE_JOB_CANCELLED : VB_ENGINE_JOB_FINISHED);
  g_message ("%s: md's %s %s", a->name, a->job_op, a->job_cancel ? "cancelled" : "finished");
  g_clear_pointer (&a->job_op, g_free);
  g_clear_pointer (&a->job_component, g_free);
  a->job_id = 0;
  a->job_slot = -1;
  a->job_seen = a->job_cancel = FALSE;
  a->job_bytes = a->job_done = 0;
}

static void
jobs_locked (MdArray *a, GArray *pfds)
{
  g_autofree char *action = watch (a, "sync_action", pfds);
  g_autofree char *completed = NULL;
  gboolean running = action && strcmp (action, "idle") != 0 && strcmp (action, "frozen") != 0;
  const char *op = !running ? NULL : strcmp (action, "recover") == 0 ? "rebuild" : action;
  guint64 done = 0, total = 0;

  if (!running)
    {
      /* a check asked for and not yet seen running stays a while */
      if (a->job_op && (a->job_seen || g_get_monotonic_time () - a->job_asked > 5 * G_USEC_PER_SEC))
        end_job_locked (a);
      return;
    }
  if (a->job_op && a->job_seen && strcmp (a->job_op, op) != 0)
    end_job_locked (a);
  if (a->job_op == NULL)
    {
      a->job_id = __atomic_fetch_add (&next_job_id, 1, __ATOMIC_RELAXED);
      a->job_op = g_strdup (op);
    }
  if (!a->job_seen)
    {
      a->job_seen = TRUE;
      if (strcmp (op, "rebuild") == 0)
        for (guint i = 0; i < a->n; i++)
          if (a->members[i] && a->members[i]->rebuilding && !a->members[i]->removed)
            {
              a->job_slot = (gint) i;
              g_free (a->job_component);
              a->job_component = g_strdup (a->members[i]->uuid);
              break;
            }
      g_message ("%s: md runs %s", a->name, op);
    }
  completed = md_get (a, "sync_completed");
  if (completed
      && sscanf (completed, "%" G_GUINT64_FORMAT " / %" G_GUINT64_FORMAT, &done, &total) == 2)
    {
      a->job_done = done * SECTOR;
      a->job_bytes = total * SECTOR;
    }
  report_job_locked (a, VB_ENGINE_JOB_RUNNING);
}

/* A member md marked faulty whose failure is not in the superblocks yet. */
static gboolean
unrecorded_failure_locked (MdArray *a)
{
  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autofree char *attr = NULL, *st = NULL;
      if (m == NULL || m->removed || m->failed)
        continue;
      attr = dev_attr (m, "state");
      st = md_get (a, attr);
      if (has_word (st, "faulty"))
        return TRUE;
    }
  return FALSE;
}

/* The members' states answered: failures recorded, then unblocked and
 * removed; recoveries recorded; spares placed. TRUE when something was
 * done. */
static gboolean
members_locked (MdArray *a, GArray *pfds)
{
  gboolean acted = FALSE;

  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autofree char *attr = NULL, *st = NULL;
      if (m && m->removed && m->failed && a->spare_paths->len > 0 && take_spare_locked (a, i))
        {
          m = a->members[i];
          acted = TRUE;
        }
      if (m == NULL || m->removed)
        continue;
      attr = dev_attr (m, "state");
      st = watch (a, attr, pfds);
      if (st == NULL)
        {
          /* removed by someone else (mdadm --remove) */
          if (!m->failed)
            record_failure_locked (a, i, "left the array", FALSE);
          member_gone_locked (a, i, TRUE);
          acted = TRUE;
        }
      else if (has_word (st, "faulty"))
        {
          if (!m->failed)
            {
              if (!record_failure_locked (a, i, "was marked faulty by md", FALSE))
                continue; /* md keeps holding it; tried again at the next look */
              acted = TRUE;
            }
          /* md1: md unblocks it once its own superblocks say faulty */
          if (has_word (st, "blocked"))
            {
              g_autofree char *after = NULL;
              if (!a->native && md_set (a, attr, "-blocked") == 0)
                {
                  after = md_get (a, attr);
                  acted |= g_strcmp0 (after, st) != 0; /* no spinning on a state md keeps */
                }
            }
          else if (md_set (a, attr, "remove") == 0)
            {
              member_gone_locked (a, i, TRUE);
              acted = TRUE;
            }
        }
      else if (m->rebuilding && has_word (st, "in_sync"))
        {
          m->rebuilding = FALSE;
          if (a->meta)
            {
              a->sb.roles[i].state = VB_ROLE_IN_SYNC;
              write_all_locked (a);
            }
          g_message ("%s: component %u (%s) is in sync", a->name, i, m->path);
          acted = TRUE;
        }
    }
  return acted;
}

/* One look at the array: every change md announced answered. TRUE when
 * something was done, so the look is taken again at once. */
static gboolean
act_locked (MdArray *a, GArray *pfds)
{
  g_autofree char *state = watch (a, "array_state", pfds);
  gboolean acted;

  if (state == NULL || strcmp (state, "inactive") == 0 || strcmp (state, "clear") == 0)
    return FALSE; /* stopped under us */

  /* components first: a failure is in the superblocks before md goes on */
  acted = members_locked (a, pfds);

  if (a->native)
    ; /* md keeps its own superblocks clean and dirty */
  else if (strcmp (state, "write-pending") == 0)
    {
      if (a->sb.clean)
        {
          a->sb.clean = FALSE;
          write_all_locked (a);
        }
      /* "active" lets md acknowledge the writes it holds: a member that
       * failed since the look above is recorded first */
      if (unrecorded_failure_locked (a))
        acted = TRUE;
      else
        acted |= md_set (a, "array_state", "active") == 0;
    }
  else if (!a->read_only
           && (strcmp (state, "active-idle") == 0 || strcmp (state, "read-auto") == 0))
    acted |= md_set (a, "array_state", "clean") == 0;
  else if (strcmp (state, "clean") == 0 && a->meta && !a->sb.clean)
    {
      g_autofree char *resync = md_get (a, "resync_start");
      if (g_strcmp0 (resync, "none") == 0)
        {
          a->sb.clean = TRUE;
          write_all_locked (a);
          acted = TRUE;
        }
    }
  /* a job's end is heard with the states it leaves (a rebuilt slot in sync) */
  publish_status_locked (a);
  jobs_locked (a, pfds);
  return acted;
}

static gpointer
monitor_thread (gpointer data)
{
  MdArray *a = data;

  for (;;)
    {
      g_autoptr (GArray) pfds = g_array_new (FALSE, FALSE, sizeof (struct pollfd));
      struct pollfd w = { .fd = a->wake, .events = POLLIN };
      gboolean acted;
      int timeout;
      guint64 count;

      g_mutex_lock (&a->lock);
      if (a->stopping)
        {
          g_mutex_unlock (&a->lock);
          break;
        }
      acted = act_locked (a, pfds);
      publish_status_locked (a);
      timeout = a->job_op ? JOB_TICK_MS : IDLE_TICK_MS;
      g_mutex_unlock (&a->lock);
      if (!acted)
        {
          g_array_append_val (pfds, w);
          if (poll ((struct pollfd *) pfds->data, pfds->len, timeout) < 0 && errno != EINTR)
            g_usleep (100000);
          if (read (a->wake, &count, sizeof count) < 0 && errno != EAGAIN)
            g_debug ("%s: monitor wake: %s", a->md, g_strerror (errno));
        }
      for (guint i = 0; i < pfds->len; i++)
        if (g_array_index (pfds, struct pollfd, i).fd != a->wake)
          close (g_array_index (pfds, struct pollfd, i).fd);
    }
  return NULL;
}

static void
monitor_start (MdArray *a)
{
  g_autofree char *name = g_strdup_printf ("md-%s", a->name);

  a->stopping = FALSE;
  a->thread = g_thread_new (name, monitor_thread, a);
}

static void
monitor_stop (MdArray *a)
{
  if (a->thread == NULL)
    return;
  g_mutex_lock (&a->lock);
  a->stopping = TRUE;
  g_mutex_unlock (&a->lock);
  wake (a);
  g_thread_join (a->thread);
  a->thread = NULL;
}

/* The table takes a reference of its own. */
static void
register_array (MdArray *a)
{
  g_mutex_lock (&arrays_lock);
  if (arrays == NULL)
    arrays = g_hash_table_new (g_str_hash, g_str_equal);
  g_atomic_int_inc (&a->refs);
  g_hash_table_insert (arrays, a->block_device, a);
  g_mutex_unlock (&arrays_lock);
}

static void
unregister_array (MdArray *a)
{
  gboolean held;

  g_mutex_lock (&arrays_lock);
  held = arrays && g_hash_table_lookup (arrays, a->block_device) == a;
  if (held)
    g_hash_table_remove (arrays, a->block_device);
  g_mutex_unlock (&arrays_lock);
  if (held)
    array_unref (a);
}

/* A reference to the array of @block_device (array_unref), or NULL: a
 * stop on another thread may free it meanwhile otherwise. */
static MdArray *
lookup_array (const char *block_device)
{
  MdArray *a;

  g_mutex_lock (&arrays_lock);
  a = arrays ? g_hash_table_lookup (arrays, block_device) : NULL;
  if (a)
    g_atomic_int_inc (&a->refs);
  g_mutex_unlock (&arrays_lock);
  return a;
}

/* ---- start ---- */

/* array_state=clear, retried while something (udev's probe) holds the
 * node open: md stops the array and deletes it. */
static int
clear_array (MdArray *a)
{
  int r = -EBUSY;

  for (guint i = 0; i < CLEAR_TRIES && (r = md_set (a, "array_state", "clear")) == -EBUSY; i++)
    g_usleep (100000);
  if (r < 0)
    g_warning ("%s: md array %s could not be stopped: %s", a->name, a->md, g_strerror (-r));
  return r;
}

/* new_array: the empty array appears. An array of that name already
 * there (-EEXIST) is said in @error; other errors are the caller's. */
static int
create_array (MdArray *a, GError **error)
{
  int r = sys_write (NEW_ARRAY, a->md);

  if (r == -EEXIST)
    g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "md array %s exists already", a->md);
  return r;
}

static gboolean
configure (MdArray *a, const VbLayout *layout, gboolean resync, GError **error)
{
  guint64 data_offset = a->meta ? a->sb.data_offset : 0;
  guint64 data_size = a->meta ? a->sb.data_size : layout->component_size;
  int r;
  g_autofree char *what = g_strdup ("new_array");

  r = create_array (a, error);
  if (r == -EEXIST)
    return FALSE;
#define SET(attr, value)                                                                           \
  if (r == 0)                                                                                      \
    {                                                                                              \
      g_free (what);                                                                               \
      what = g_strdup (attr);                                                                      \
      r = (value);                                                                                 \
    }
  SET ("metadata_version", md_set (a, "metadata_version", MD_METADATA));
  SET ("level", md_set (a, "level", a->driver));
  if (layout->chunk_size)
    SET ("chunk_size", md_set_u64 (a, "chunk_size", layout->chunk_size));
  /* raid10: near copies in the low byte, one far copy */
  if (strcmp (a->driver, "raid10") == 0)
    SET ("layout", md_set_u64 (a, "layout", 0x100 | a->copies));
  SET ("raid_disks", md_set_u64 (a, "raid_disks", a->n));
  if (a->copies > 1)
    SET ("resync_start", md_set (a, "resync_start", resync ? "0" : "none"));
  for (guint i = 0; i < a->n && r == 0; i++)
    {
      Member *m = a->members[i];
      g_autofree char *dev = NULL, *offset = NULL, *size = NULL, *state = NULL, *rstart = NULL,
                      *slot = NULL;
      if (m == NULL || m->removed)
        continue;
      dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
      offset = dev_attr (m, "offset");
      size = dev_attr (m, "size");
      state = dev_attr (m, "state");
      rstart = dev_attr (m, "recovery_start");
      slot = dev_attr (m, "slot");
      SET ("new_dev", md_set (a, "new_dev", dev));
      SET (offset, md_set_u64 (a, offset, data_offset / SECTOR));
      SET (size, md_set_u64 (a, size, data_size / 1024));
      /* as mdadm does: in-sync before the slot; where recovery starts
       * after it (setting the slot of an inactive array marks the
       * member in sync) */
      if (!m->rebuilding && a->copies > 1)
        md_set (a, state, "insync");
      SET (slot, md_set_u64 (a, slot, i));
      if (m->rebuilding)
        {
          SET (rstart, md_set (a, rstart, "0"));
        }
    }
  if (a->copies > 1)
    SET ("component_size", md_set_u64 (a, "component_size", data_size / 1024));
  vb_test_hook ("md:configured");
  SET ("array_state", md_set (a, "array_state", a->read_only ? "readonly" : "active"));
#undef SET
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "md refused %s of %s (%s): %s", what, a->md,
                   a->name, g_strerror (-r));
      clear_array (a);
      return FALSE;
    }
  return TRUE;
}

/* md1: md reads everything from the members' superblocks; a member md
 * leaves out (not fresh) is added back and recovered. */
static gboolean
configure_native (MdArray *a, GError **error)
{
  g_autofree char *state = NULL;
  int r = create_array (a, error);
  const char *what = "new_array";
  gboolean recover = FALSE;

  if (r == -EEXIST)
    return FALSE;
  if (r == 0)
    {
      what = "metadata_version";
      r = md_set (a, "metadata_version", a->md_version);
    }
  for (guint i = 0; i < a->n && r == 0; i++)
    {
      Member *m = a->members[i];
      g_autofree char *dev = NULL;
      if (m == NULL)
        continue;
      dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
      what = m->path;
      r = md_set (a, "new_dev", dev);
    }
  if (r == 0)
    {
      what = "array_state";
      r = md_set (a, "array_state", a->read_only ? "readonly" : "active");
    }
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "md refused %s of %s (%s): %s (does every component carry a superblock of "
                   "the array, md %s?)",
                   what, a->md, a->name, g_strerror (-r), a->md_version);
      clear_array (a);
      return FALSE;
    }
  /* started read-auto, md would wait for a write to resync */
  state = md_get (a, "array_state");
  if (!a->read_only && g_strcmp0 (state, "read-auto") == 0)
    md_set (a, "array_state", "active");
  for (guint i = 0; i < a->n; i++)
    {
      Member *m = a->members[i];
      g_autofree char *attr = NULL, *st = NULL;
      if (m == NULL)
        continue;
      attr = dev_attr (m, "state");
      st = md_get (a, attr);
      if (st == NULL)
        {
          g_autofree char *dev = g_strdup_printf ("%u:%u", major (m->devnum), minor (m->devnum));
          g_message ("%s: md left '%s' out (not fresh); adding it back", a->name, m->path);
          if (md_set (a, "new_dev", dev) < 0)
            {
              m->failed = m->removed = TRUE;
              continue;
            }
          m->rebuilding = TRUE;
          recover = TRUE;
        }
      else
        m->rebuilding = !has_word (st, "in_sync");
    }
  if (recover)
    md_set (a, "sync_action", "recover");
  return TRUE;
}

static void
write_run_file (MdArray *a)
{
  g_autofree char *path = run_file (a->md);
  g_autofree char *dir = g_path_get_dirname (path);
  g_autofree char *text = g_strdup_printf ("%s\n%s\n", a->uuid, a->name);
  g_autoptr (GError) local = NULL;

  if (g_mkdir_with_parents (dir, 0700) != 0
      || !g_file_set_contents_full (path, text, -1, G_FILE_SET_CONTENTS_CONSISTENT, 0600, &local))
    g_warning ("%s: %s: %s", a->name, path, local ? local->message : g_strerror (errno));
}

char *
vb_kernel_md_start (const VbBackendRequest *request, GError **error)
{
  g_autofree char *tag = vb_kernel_loop_tag (request->instance, request->uuid);
  g_autoptr (GPtrArray) nodes = g_ptr_array_new_with_free_func (g_free);
  g_autoptr (GPtrArray) attached = g_ptr_array_new_with_free_func (g_free);
  MdArray *a = array_new (request->instance, request->uuid, request->name, request->driver->name,
                          request->n_components);
  VbLayout layout = { 0 };
  VbUdevWatch *watch = NULL;
  gboolean resync = FALSE;
  char *block_device;

  request->driver->layout (request->attributes, request->components, request->n_components,
                           &layout);
  a->copies = layout.copies ? layout.copies : 1;
  a->native = g_strcmp0 (g_hash_table_lookup (request->attributes, "metadata"), "md1") == 0;
  a->meta = !a->native && vb_driver_data_offset (request->attributes) > 0;
  a->md_version
      = g_strdup (a->native ? g_hash_table_lookup (request->attributes, "md_version") : NULL);
  a->read_only = g_strcmp0 (g_hash_table_lookup (request->attributes, "read_only"), "true") == 0;
  for (guint i = 0; i < request->n_spares; i++)
    {
      g_ptr_array_add (a->spare_paths, g_strdup (request->spare_paths[i]));
      g_ptr_array_add (a->spare_uuids, g_strdup (request->spare_uuids[i]));
    }
  if (!vb_kernel_component_nodes (request, tag, a->read_only, nodes, attached, error))
    goto fail;
  for (guint i = 0; i < a->n; i++)
    if (nodes->pdata[i]
        && (a->members[i] = member_new (request->paths[i], request->component_uuids[i],
                                        nodes->pdata[i], a->meta, error))
               == NULL)
      goto fail;
  if (a->meta)
    {
      if (!assemble (a, request, &layout, error))
        goto fail;
      resync = !a->sb.clean;
      if (!a->read_only)
        {
          a->sb.clean = FALSE;
          /* superblocks from before events_cleared was recorded: no copy
           * older than this write is trusted (assembly.h) */
          if (!(a->sb.features & VB_SB_FEATURE_EVENTS_CLEARED))
            vb_assembly_record_clear (&a->sb);
          write_all_locked (a);
          for (guint i = 0; i < a->n; i++)
            write_bitmap (a, a->members[i], TRUE);
        }
    }
  watch = vb_udev_watch_begin ();
  if (!(a->native ? configure_native (a, error) : configure (a, &layout, resync, error)))
    goto fail;
  vb_udev_watch_end (g_steal_pointer (&watch), vb_devnum_of (a->block_device), "change");
  write_run_file (a);
  publish_status_locked (a); /* nobody else has it yet */
  register_array (a);
  monitor_start (a);
  g_message ("%s: md array %s (%s, %u components%s)", a->name, a->md, a->driver, a->n,
             resync ? ", resyncing" : "");
  block_device = g_strdup (a->block_device);
  array_unref (a); /* the table keeps it */
  return block_device;

fail:
  vb_udev_watch_end (watch, 0, NULL);
  array_unref (a);
  vb_kernel_detach_all (attached);
  return NULL;
}

/* ---- an array found running (vblkd started again) ---- */

/* Where the data starts on the first member md lists (sectors; 0: none). */
static guint64
member_offset (MdArray *a, const char *sysdir)
{
  g_autoptr (GDir) dir = g_dir_open (sysdir, 0, NULL);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    if (g_str_has_prefix (entry, "dev-"))
      {
        g_autofree char *attr = g_build_filename (entry, "offset", NULL);
        g_autofree char *offset = md_get (a, attr);
        return offset ? g_ascii_strtoull (offset, NULL, 10) : 0;
      }
  return 0;
}

static MdArray *
attach_running (const char *md, const char *instance)
{
  g_autofree char *sysdir = g_strdup_printf ("/sys/block/%s/md", md);
  g_autofree char *path = run_file (md);
  g_autofree char *text = NULL, *version = NULL, *level = NULL, *disks = NULL, *layout = NULL;
  g_auto (GStrv) lines = NULL;
  g_autoptr (GDir) dir = NULL;
  const char *entry;
  MdArray *a;
  gint best = -1;
  guint64 best_events = 0;

  g_autofree char *p_version = g_build_filename (sysdir, "metadata_version", NULL);
  g_autofree char *p_level = g_build_filename (sysdir, "level", NULL);
  g_autofree char *p_disks = g_build_filename (sysdir, "raid_disks", NULL);

  version = sys_read (p_version);
  if (version == NULL || (strcmp (version, MD_METADATA) != 0 && !g_str_has_prefix (version, "1."))
      || !g_file_get_contents (path, &text, NULL, NULL))
    return NULL;
  lines = g_strsplit (text, "\n", 3);
  if (g_strv_length (lines) < 2)
    return NULL;
  level = sys_read (p_level);
  disks = sys_read (p_disks);
  if (level == NULL || disks == NULL)
    return NULL;
  a = array_new (instance, lines[0], lines[1], level, (guint) g_ascii_strtoull (disks, NULL, 10));
  if (a->n == 0 || strcmp (a->md, md) != 0)
    {
      array_unref (a);
      return NULL;
    }
  layout = md_get (a, "layout");
  a->copies = strcmp (level, "raid1") == 0    ? a->n
              : strcmp (level, "raid10") == 0 ? (guint) (g_ascii_strtoull (layout, NULL, 10) & 0xff)
                                              : 1;
  a->native = g_str_has_prefix (version, "1.");
  a->md_version = a->native ? g_strdup (version) : NULL;
  /* a raid0 runs with or without vblk's superblocks; with them, its data
   * starts past them on every member */
  a->meta = !a->native && (a->copies > 1 || member_offset (a, sysdir) > 0);
  dir = g_dir_open (sysdir, 0, NULL);
  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *slot = NULL, *state = NULL, *node = NULL, *a_slot = NULL, *a_state = NULL;
      g_autoptr (GError) local = NULL;
      VbSuperblock sb;
      Member *m;
      guint64 s;
      if (!g_str_has_prefix (entry, "dev-"))
        continue;
      a_slot = g_build_filename (entry, "slot", NULL);
      a_state = g_build_filename (entry, "state", NULL);
      slot = md_get (a, a_slot);
      state = md_get (a, a_state);
      if (slot == NULL || !g_ascii_string_to_unsigned (slot, 10, 0, a->n - 1, &s, NULL))
        continue;
      node = g_strdup_printf ("/dev/%s", entry + 4);
      m = member_new (node, "", node, a->meta, &local);
      if (m == NULL)
        {
          g_warning ("%s: %s", md, local->message);
          continue;
        }
      /* a faulty member is recorded by the monitor (again, if the killed
       * vblkd had done it): its superblocks may not say so yet */
      m->rebuilding = !has_word (state, "faulty") && !has_word (state, "in_sync");
      if (a->native && vb_metadata_md1.read (-1, m->node, &sb, NULL))
        {
          g_free (m->uuid);
          m->uuid = g_strdup (sb.component_uuid);
        }
      else if (a->meta && vb_superblock_read (m->fd, m->path, &sb, NULL))
        {
          g_free (m->uuid);
          m->uuid = g_strdup (sb.component_uuid);
          if (best < 0 || sb.events > best_events)
            {
              best = (gint) s;
              best_events = sb.events;
              a->sb = sb;
            }
        }
      member_free (a->members[s]);
      a->members[s] = m;
    }
  if (a->meta && best < 0)
    {
      g_warning ("%s: no member holds a readable vblk superblock; not watching it", md);
      array_unref (a);
      return NULL;
    }
  return a;
}

void
vb_kernel_md_scan (const char *instance, GPtrArray *found)
{
  g_autofree char *prefix = g_strdup_printf (MD_NAME_PREFIX "%s_", instance);
  g_autoptr (GDir) dir = g_dir_open ("/sys/block", 0, NULL);
  const char *entry;

  while (dir && (entry = g_dir_read_name (dir)))
    {
      g_autofree char *bd = NULL;
      g_autoptr (MdArray) a = NULL;
      VbBackendInstance *node;
      if (!g_str_has_prefix (entry, prefix))
        continue;
      bd = g_strdup_printf ("/dev/%s", entry);
      a = lookup_array (bd);
      if (a == NULL && (a = attach_running (entry, instance)) != NULL)
        {
          publish_status_locked (a); /* nobody else has it yet */
          register_array (a);
          monitor_start (a);
          g_message ("%s: md array %s found running; watching it again", a->name, a->md);
        }
      if (a == NULL)
        continue;
      node = g_new0 (VbBackendInstance, 1);
      node->uuid = g_strdup (a->uuid);
      node->block_device = g_strdup (a->block_device);
      node->backing = g_strdup_printf ("md array %s", a->md);
      g_ptr_array_add (found, node);
    }
}

/* ---- stop ---- */

gboolean
vb_kernel_md_stop (const char *block_device, const char *instance, const char *uuid, GError **error)
{
  g_autofree char *base = g_path_get_basename (block_device);
  g_autofree char *tag = vb_kernel_loop_tag (instance, uuid);
  g_autofree char *resync = NULL, *path = NULL;
  g_autoptr (GPtrArray) loops = NULL;
  g_autoptr (GArray) pfds = g_array_new (FALSE, FALSE, sizeof (struct pollfd));
  g_autoptr (MdArray) a = lookup_array (block_device);
  gboolean watched = a != NULL;
  int r;

  if (a == NULL && access (block_device, F_OK) == 0)
    {
      a = attach_running (base, instance);
      if (a == NULL)
        {
          g_autofree char *file = run_file (base);
          g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                       "%s runs, but vblkd cannot tell which device it is (%s is gone); not "
                       "stopping it (mdadm --stop does)",
                       block_device, file);
          return FALSE;
        }
    }
  if (a == NULL)
    {
      /* the array is gone; what was under it goes too */
      loops = vb_kernel_tagged_loops (tag, instance);
      vb_kernel_detach_all (loops);
      return TRUE;
    }
  if (strcmp (a->uuid, uuid) != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED,
                   "%s belongs to another device (%s), not stopping it", block_device, a->uuid);
      return FALSE;
    }
  monitor_stop (a);
  /* a failure md found since the monitor's last look is recorded first */
  g_mutex_lock (&a->lock);
  members_locked (a, pfds);
  resync = md_get (a, "resync_start");
  g_mutex_unlock (&a->lock);
  for (guint i = 0; i < pfds->len; i++)
    close (g_array_index (pfds, struct pollfd, i).fd);
  r = clear_array (a);
  if (r < 0)
    {
      g_set_error (error, VB_ERROR, r == -EBUSY ? VB_ERROR_BUSY : VB_ERROR_FAILED,
                   "stopping md array %s: %s", a->md,
                   r == -EBUSY ? "it is in use (mounted or open)" : g_strerror (-r));
      if (watched)
        monitor_start (a);
      return FALSE;
    }
  /* md has written everything: the copies are equal unless a resync was
   * still to run */
  g_mutex_lock (&a->lock);
  if (a->meta && !a->read_only)
    {
      a->sb.clean = a->copies == 1 || g_strcmp0 (resync, "none") == 0;
      /* the bitmap is cleared after this write: a copy of a component
       * taken before it is never resynced from the cleared bits */
      if (a->sb.clean)
        vb_assembly_record_clear (&a->sb);
      write_all_locked (a);
      if (a->sb.clean)
        for (guint i = 0; i < a->n; i++)
          write_bitmap (a, a->members[i], FALSE);
    }
  g_mutex_unlock (&a->lock);
  unregister_array (a);
  path = run_file (a->md);
  unlink (path);
  g_message ("%s: md array %s stopped%s", a->name, a->md, a->meta && a->sb.clean ? " clean" : "");
  loops = vb_kernel_tagged_loops (tag, instance);
  vb_kernel_detach_all (loops);
  return TRUE;
}

/* ---- while it runs ---- */

gboolean
vb_kernel_md_update (const char *block_device, const VbBackendRequest *request, GError **error)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  static const char *const speeds[] = { "sync_speed_min", "sync_speed_max" };

  if (a == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, "%s: no md array of vblkd's", block_device);
      return FALSE;
    }
  g_mutex_lock (&a->lock);
  /* md's speeds are KiB/s; 0 leaves md's own ("system") */
  for (guint i = 0; i < G_N_ELEMENTS (speeds); i++)
    if (g_hash_table_contains (request->attributes, speeds[i]))
      {
        guint64 v = vb_attr_get_u64 (request->attributes, speeds[i]);
        g_autofree char *text
            = v ? g_strdup_printf ("%" G_GUINT64_FORMAT, MAX (v / 1024, 1)) : g_strdup ("system");
        md_set (a, speeds[i], text);
      }
  if (a->meta)
    {
      vb_superblock_set_attributes (&a->sb, request->attributes);
      write_all_locked (a);
    }
  g_mutex_unlock (&a->lock);
  return TRUE;
}

gboolean
vb_kernel_md_component_status (const char *block_device, guint component, gboolean *faulty,
                               gboolean *rebuilding, guint64 *errors)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  g_autofree char *attr = NULL, *text = NULL;

  if (a == NULL || component >= a->n)
    return FALSE;
  g_mutex_lock (&a->status_lock);
  *faulty = a->status[component].faulty;
  *rebuilding = a->status[component].rebuilding;
  attr = g_strdup (a->status[component].errors);
  g_mutex_unlock (&a->status_lock);
  text = attr ? md_get (a, attr) : NULL;
  *errors = text ? g_ascii_strtoull (text, NULL, 10) : 0;
  return TRUE;
}

gboolean
vb_kernel_md_component_missing (const char *block_device, guint component)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  gboolean missing;

  if (a == NULL || component >= a->n)
    return FALSE;
  g_mutex_lock (&a->status_lock);
  missing = !a->status[component].present;
  g_mutex_unlock (&a->status_lock);
  return missing;
}

gboolean
vb_kernel_md_lost_data (const char *block_device)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  g_autofree gboolean *healthy = NULL;
  gboolean lost;

  if (a == NULL)
    return FALSE;
  healthy = g_new0 (gboolean, a->n);
  g_mutex_lock (&a->status_lock);
  for (guint i = 0; i < a->n; i++)
    healthy[i] = a->status[i].healthy;
  g_mutex_unlock (&a->status_lock);
  /* a raid0 has one copy: every member must be there */
  lost = !every_chunk_has_a_copy (a, healthy, -1);
  return lost;
}

static int
set_faulty (const char *block_device, guint component)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  g_autofree gboolean *healthy = NULL;
  Member *m;
  g_autofree char *attr = NULL, *st = NULL;
  int r = 0;

  /* not an md array (a device-mapper node of backend kernel): no redundancy */
  if (a == NULL || a->copies == 1)
    return -ENOTSUP;
  if (component >= a->n)
    return -ENODEV;
  healthy = g_new0 (gboolean, a->n);
  g_mutex_lock (&a->lock);
  m = a->members[component];
  if (m == NULL || m->failed || m->removed)
    goto out;
  for (guint i = 0; i < a->n; i++)
    healthy[i] = member_healthy (a->members[i]);
  if (!m->rebuilding && !every_chunk_has_a_copy (a, healthy, (gint) component))
    {
      r = -EBUSY;
      goto out;
    }
  attr = dev_attr (m, "state");
  r = md_set (a, attr, "faulty");
  st = md_get (a, attr);
  if (!has_word (st, "faulty"))
    {
      r = r < 0 ? r : -EBUSY;
      goto out;
    }
  r = 0;
  /* recorded before md may go on; the monitor unblocks and removes it */
  record_failure_locked (a, component, "was set faulty", TRUE);
out:
  publish_status_locked (a);
  g_mutex_unlock (&a->lock);
  wake (a);
  return r;
}

gboolean
vb_kernel_md_set_faulty (const char *block_device, guint component, GError **error)
{
  return vb_backend_errno (set_faulty (block_device, component), error);
}

void
vb_kernel_md_release (const char *block_device, guint component)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  Member *m;

  if (a == NULL || component >= a->n)
    return;
  g_mutex_lock (&a->lock);
  m = a->members[component];
  if (m && m->failed && !m->removed)
    {
      g_autofree char *attr = dev_attr (m, "state");
      md_set (a, attr, "-blocked");
      if (md_set (a, attr, "remove") == 0)
        member_gone_locked (a, component, FALSE);
    }
  publish_status_locked (a);
  g_mutex_unlock (&a->lock);
}

gboolean
vb_kernel_md_check (const char *block_device, gboolean repair, guint64 *job, GError **error)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  g_autofree char *action = NULL;
  int r;

  /* not an md array (a device-mapper node of backend kernel): no copies */
  if (a == NULL || a->copies == 1)
    return vb_backend_errno (-ENOTSUP, error);
  g_mutex_lock (&a->lock);
  action = md_get (a, "sync_action");
  if (a->job_op || g_strcmp0 (action, "idle") != 0)
    {
      g_mutex_unlock (&a->lock);
      return vb_backend_errno (-EBUSY, error);
    }
  r = md_set (a, "sync_action", repair ? "repair" : "check");
  if (r < 0)
    {
      g_mutex_unlock (&a->lock);
      return vb_backend_errno (r, error);
    }
  a->job_id = __atomic_fetch_add (&next_job_id, 1, __ATOMIC_RELAXED);
  a->job_op = g_strdup (repair ? "repair" : "check");
  a->job_asked = g_get_monotonic_time ();
  *job = a->job_id;
  g_mutex_unlock (&a->lock);
  wake (a);
  return TRUE;
}

gboolean
vb_kernel_md_cancel_job (const char *block_device, guint64 job, GError **error)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  int r;

  if (a == NULL)
    return vb_backend_errno (-ESRCH, error);
  g_mutex_lock (&a->lock);
  if (a->job_op == NULL || a->job_id != job)
    {
      g_mutex_unlock (&a->lock);
      return vb_backend_errno (-ESRCH, error);
    }
  a->job_cancel = TRUE;
  /* a check ends; a resync or recovery would start again at once, so md
   * is held (frozen) until the array starts again */
  r = md_set (a, "sync_action",
              strcmp (a->job_op, "check") == 0 || strcmp (a->job_op, "repair") == 0 ? "idle"
                                                                                    : "frozen");
  g_mutex_unlock (&a->lock);
  wake (a);
  return vb_backend_errno (r, error);
}

gboolean
vb_kernel_md_readd (const char *block_device, guint slot, const char *path, const char *uuid,
                    GError **error)
{
  g_autoptr (MdArray) a = lookup_array (block_device);
  Member *m;
  g_autofree char *keep_uuid = NULL;
  gboolean ok;

  if (a == NULL || slot >= a->n)
    {
      g_set_error (error, VB_ERROR, a ? VB_ERROR_FAILED : VB_ERROR_NOT_SUPPORTED,
                   "%s: no slot %u of an md array of vblkd's (no redundancy to re-add to)",
                   block_device, slot);
      return FALSE;
    }
  g_mutex_lock (&a->lock);
  m = a->members[slot];
  if (m && !m->failed && !m->removed)
    {
      g_mutex_unlock (&a->lock);
      g_set_error (error, VB_ERROR, VB_ERROR_BUSY, "slot %u of %s is in use by '%s'", slot, a->name,
                   m->path);
      return FALSE;
    }
  if (m && !m->removed)
    {
      g_autofree char *attr = dev_attr (m, "state");
      md_set (a, attr, "-blocked");
      if (md_set (a, attr, "remove") < 0)
        {
          g_mutex_unlock (&a->lock);
          g_set_error (error, VB_ERROR, VB_ERROR_BUSY,
                       "md has not let go of the failed component in slot %u of %s yet", slot,
                       a->name);
          return FALSE;
        }
      member_gone_locked (a, slot, FALSE);
    }
  keep_uuid = g_strdup (uuid ? uuid : m ? m->uuid : a->sb.roles[slot].uuid);
  ok = add_member_locked (a, slot, path, keep_uuid, error);
  publish_status_locked (a);
  g_mutex_unlock (&a->lock);
  wake (a);
  return ok;
}

void
vb_kernel_md_set_spares (const char *block_device, guint n, const char *const *paths,
                         const char *const *uuids)
{
  g_autoptr (MdArray) a = lookup_array (block_device);

  if (a == NULL)
    return;
  g_mutex_lock (&a->lock);
  g_ptr_array_set_size (a->spare_paths, 0);
  g_ptr_array_set_size (a->spare_uuids, 0);
  for (guint i = 0; i < n; i++)
    {
      g_ptr_array_add (a->spare_paths, g_strdup (paths[i]));
      g_ptr_array_add (a->spare_uuids, g_strdup (uuids[i]));
    }
  g_mutex_unlock (&a->lock);
  wake (a);
}

/* md arrays are not served by this process: no in-process access, and
 * the slots' sources are the desired state's */
static gboolean
md_block_ops (const char *block_device, const VbBlockOps **ops, void **handle)
{
  return FALSE;
}

static char *
md_slot_source (const char *block_device, guint component)
{
  return NULL;
}

const VbEngineDeviceOps vb_kernel_md_ops = {
  .component_status = vb_kernel_md_component_status,
  .slot_source = md_slot_source,
  .component_missing = vb_kernel_md_component_missing,
  .lost_data = vb_kernel_md_lost_data,
  .set_faulty = vb_kernel_md_set_faulty,
  .release = vb_kernel_md_release,
  .block_ops = md_block_ops,
  .check = vb_kernel_md_check,
  .cancel_job = vb_kernel_md_cancel_job,
  .readd = vb_kernel_md_readd,
  .set_spares = vb_kernel_md_set_spares,
};
