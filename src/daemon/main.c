/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vblkd: owns org.vblk.VBlk1 on the system bus, the desired state of
 * every vblk device, and reconciles it with what runs in the kernel. */
#include "config.h"

#include "vb-boot.h"
#include "vb-bus.h"
#include "vb-report.h"
#include "vb-engine-jobs.h"
#include "vb-exports.h"
#include "vb-jobs.h"
#include "vb-manager.h"
#include "vb-objects.h"
#include "vb-policy-dbus.h"
#include "vb-state-dir.h"
#include "vb-state-store.h"
#include "vb-udev.h"

#include <blockdev/blockdev.h>
#include <errno.h>
#include <fcntl.h>
#include <glib-unix.h>
#include <glib/gi18n.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <string.h>
#include <unistd.h>

static void notify_systemd (const char *state);

static char *opt_state_dir = NULL;
static char *opt_run_dir = NULL;
static char *opt_dev_dir = NULL;
static char *opt_policy_dir = NULL;
static gboolean opt_debug = FALSE;
static gboolean opt_replace = FALSE;
static char *opt_initramfs = NULL;
static gboolean opt_takeover = FALSE;
static gboolean opt_print_state = FALSE;

/* The options; the descriptions that name a default are made at start
 * (options_with_defaults), so that their text is translatable. */
static GOptionEntry entries[] = {
  { "state-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_state_dir, NULL, N_ ("DIR") },
  { "run-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_run_dir, NULL, N_ ("DIR") },
  { "dev-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_dev_dir, NULL, N_ ("DIR") },
  { "policy-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_policy_dir, NULL, N_ ("DIR") },
  { "debug", 0, 0, G_OPTION_ARG_NONE, &opt_debug, N_ ("Log debug messages"), NULL },
  { "replace", 0, 0, G_OPTION_ARG_NONE, &opt_replace, N_ ("Replace a running vblkd"), NULL },
  { "initramfs", 0, 0, G_OPTION_ARG_STRING, &opt_initramfs,
    N_ ("In the initramfs: start only these devices (and those they are built on)"),
    N_ ("NAME,...") },
  { "takeover", 0, 0, G_OPTION_ARG_NONE, &opt_takeover,
    N_ ("Take over from the vblkd of the same run dir (the initramfs's), without the bus"), NULL },
  { "print-state", 0, 0, G_OPTION_ARG_NONE, &opt_print_state,
    N_ ("Print the desired state (state.json with its journal) and exit"), NULL },
  { NULL },
};

/* The descriptions with a default put in, translated (GOption's own
 * translation then finds nothing more to do with them). */
static void
options_with_defaults (void)
{
  entries[0].description
      = g_strdup_printf (_ ("Directory of the desired state (default %s)"), VB_DEFAULT_STATE_DIR);
  entries[1].description
      = g_strdup_printf (_ ("Run-time directory (default %s)"), VB_DEFAULT_RUN_DIR);
  entries[2].description = g_strdup_printf (
      _ ("Directory of the NAME links to block nodes (default %s)"), VB_DEFAULT_DEV_DIR);
  entries[3].description
      = g_strdup_printf (_ ("Read the policy rules (*.rules) from DIR alone (default: %s, then the "
                            "shipped ones of %s)"),
                         VB_DEFAULT_POLICY_DIR, VB_VENDOR_POLICY_DIR);
}

static char **main_argv;

#define LINGER_LOOK_S 1

static void shutdown_done (VbDaemon *daemon, const GError *error, gpointer user_data);

static gboolean
look_again (gpointer data)
{
  vb_daemon_submit (data, NULL, NULL, VB_OP_SHUTDOWN, NULL, shutdown_done, NULL, NULL);
  return G_SOURCE_REMOVE;
}

/* A stop leaves no write hanging: while a device whose writes wait for
 * this vblkd is in use (the root's md array with vblk's metadata), it
 * stays and serves it — argv[0] marked '@' so that systemd's last
 * killing spree spares it, as it spares mdmon — and looks again every
 * second; a takeover (SIGUSR1) ends it at once. */
static void
shutdown_done (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  static gboolean said;
  g_autofree char *names = NULL;

  if (daemon->handover || daemon->lingering == NULL || daemon->lingering[0] == NULL)
    {
      vb_daemon_quit (daemon);
      return;
    }
  names = g_strjoinv (", ", daemon->lingering);
  if (!said)
    g_message ("vblk: staying for %s: in use, and its writes need vblkd; leaving once it is "
               "not (or at a takeover)",
               names);
  said = TRUE;
  vb_boot_mark_root_storage (main_argv);
  g_timeout_add_seconds (LINGER_LOOK_S, look_again, daemon);
}

static gboolean
on_signal (gpointer data)
{
  VbDaemon *daemon = data;

  if (daemon->shutting_down)
    return G_SOURCE_CONTINUE;
  daemon->shutting_down = TRUE;
  notify_systemd ("STOPPING=1");
  g_message ("vblk: signal received, leaving kernel-run devices running");
  if (daemon->bus->object_manager == NULL)
    vb_daemon_quit (daemon); /* nothing started yet */
  else
    vb_daemon_submit (daemon, NULL, NULL, VB_OP_SHUTDOWN, NULL, shutdown_done, NULL, NULL);
  return G_SOURCE_CONTINUE;
}

/* SIGUSR1: another vblkd takes over (vblkd --takeover): leave now, also
 * while staying for a device in use. */
static gboolean
on_handover (gpointer data)
{
  VbDaemon *daemon = data;

  daemon->handover = TRUE;
  if (!daemon->shutting_down)
    return on_signal (daemon);
  g_message ("vblk: another vblkd takes over");
  vb_daemon_quit (daemon);
  return G_SOURCE_CONTINUE;
}

/* SIGUSR2: the system's last step before the power goes (vblk.shutdown,
 * the root read-only): every device left as a clean stop would, and
 * RUN_DIR/settled written, by the next look of a vblkd staying (within a
 * second); a vblkd not stopping yet stops as at SIGTERM. */
static gboolean
on_settle (gpointer data)
{
  VbDaemon *daemon = data;

  g_atomic_int_set (&daemon->settle_asked, TRUE);
  if (!daemon->shutting_down)
    return on_signal (daemon);
  return G_SOURCE_CONTINUE;
}

/* SIGHUP: read the policy rules again. */
static gboolean
on_sighup (gpointer data)
{
  vb_policy_dbus_reload_sync (data);
  return G_SOURCE_CONTINUE;
}

/* systemd's readiness protocol (sd_notify(3)): one datagram to
 * $NOTIFY_SOCKET ("@" for the abstract namespace), when there is one. */
static void
notify_systemd (const char *state)
{
  const char *path = g_getenv ("NOTIFY_SOCKET");
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  size_t len = path ? strlen (path) : 0;
  int fd;

  if (len == 0 || len >= sizeof sa.sun_path || (path[0] != '/' && path[0] != '@'))
    return;
  memcpy (sa.sun_path, path, len);
  if (sa.sun_path[0] == '@')
    sa.sun_path[0] = '\0';
  fd = socket (AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return;
  if (sendto (fd, state, strlen (state), MSG_NOSIGNAL, (struct sockaddr *) &sa,
              offsetof (struct sockaddr_un, sun_path) + len)
      < 0)
    g_debug ("vblk: telling systemd '%s': %s", state, g_strerror (errno));
  close (fd);
}

static void
startup_done (VbDaemon *daemon, const GError *error, gpointer user_data)
{
  guint n = g_hash_table_size (daemon->running);
  g_autofree char *ready = g_strdup_printf ("READY=1\nSTATUS=%u device(s), %u running",
                                            daemon->desired->devices->len, n);

  g_message ("vblk: ready: %u device(s), %u running", daemon->desired->devices->len, n);
  if (daemon->memory_locked && munlockall () == 0)
    daemon->memory_locked = FALSE;
  /* ready once the devices marked autostart are up: a unit ordered after
   * vblkd (local file systems) finds them */
  notify_systemd (ready);
  /* the disks already there go through the policy, as if just plugged */
  vb_udev_coldplug ();
}

/* At boot (a new run dir) only devices marked autostart come back up. */
static gboolean
mutate_boot (VbDaemon *daemon, VbState *candidate, gpointer user_data, VbOpIntent *intent,
             GError **error)
{
  for (guint i = 0; daemon->fresh_run_dir && i < candidate->devices->len; i++)
    {
      const VbDeviceConfig *d = candidate->devices->pdata[i];
      if (!d->started != !d->autostart)
        vb_state_device_mut (candidate, i)->started = d->autostart ? TRUE : FALSE;
    }
  return TRUE;
}

static gboolean prepare_state (VbDaemon *daemon, gboolean wait, GError **error);

static void
print_startup_error (const GError *error)
{
  g_printerr ("vblkd: %s\n", error->message);
  /* (the prefix prepare_state puts on a state file it refuses, as translated) */
  if (g_str_has_prefix (error->message, _ ("refusing to start: ")))
    g_printerr (_ ("vblkd: the file is left as it is; fix or move it away\n"));
}

#define RECONNECT_INTERVAL_S 1

static void own_name (VbDaemon *daemon, GDBusConnection *connection);

static gboolean boot (VbDaemon *daemon);

/* Whether a process owns @name on the bus now (no answer: as if it did). */
static gboolean
name_has_owner (GDBusConnection *connection, const char *name)
{
  g_autoptr (GVariant) reply = g_dbus_connection_call_sync (
      connection, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
      "NameHasOwner", g_variant_new ("(s)", name), G_VARIANT_TYPE ("(b)"), G_DBUS_CALL_FLAGS_NONE,
      -1, NULL, NULL);
  gboolean owned = TRUE;

  if (reply != NULL)
    g_variant_get (reply, "(b)", &owned);
  return owned;
}

static void
on_bus_acquired (GDBusConnection *connection, const char *name, gpointer data)
{
  VbDaemon *daemon = data;

  /* the bus going away must not end vblkd (GDBus's default raises
   * SIGTERM): the devices it serves outlive the bus */
  g_dbus_connection_set_exit_on_close (connection, FALSE);
  g_set_object (&daemon->bus->connection, connection);
  vb_objects_watch_reads (daemon, connection);
  /* With the state ours already (locked at start: not --replace) and the
   * name free, the objects are exported before the name is asked for: a
   * caller that sees the name finds them. The first call of a D-Bus
   * activation arrives as soon as the name is owned; the objects made only
   * then (the test of the package saw "Object does not exist") were too
   * late for it. */
  if (daemon->bus->object_manager == NULL && daemon->desired != NULL && !opt_takeover
      && !name_has_owner (connection, name))
    {
      if (!boot (daemon))
        return;
      g_dbus_object_manager_server_set_connection (daemon->bus->object_manager, connection);
    }
}

/* Every second until the system bus answers again; then the name is
 * owned once more and the objects are exported on the new connection. */
static gboolean
reconnect (gpointer data)
{
  VbDaemon *daemon = data;
  g_autoptr (GError) error = NULL;
  g_autoptr (GDBusConnection) connection = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error);

  if (connection == NULL || g_dbus_connection_is_closed (connection))
    return G_SOURCE_CONTINUE;
  g_message ("vblk: the system bus is there; owning %s", VB_BUS_NAME);
  daemon->bus->reconnect_source = 0;
  own_name (daemon, connection);
  return G_SOURCE_REMOVE;
}

/* The bus went away (a restart, a crash): nothing vblkd serves depends on
 * it. The objects are unexported, polkit let go of (its proxy lived on
 * that connection: every change is refused until the bus is back), and
 * the bus is tried again every second. */
static void
bus_lost_quietly (VbDaemon *daemon)
{
  daemon->bus->name_owned = FALSE;
  if (daemon->bus->owner_id)
    g_bus_unown_name (daemon->bus->owner_id);
  daemon->bus->owner_id = 0;
  g_dbus_object_manager_server_set_connection (daemon->bus->object_manager, NULL);
  g_clear_object (&daemon->bus->connection);
  g_clear_object (&daemon->bus->authority);
  if (daemon->bus->reconnect_source == 0)
    daemon->bus->reconnect_source = g_timeout_add_seconds (RECONNECT_INTERVAL_S, reconnect, daemon);
}

static void
bus_lost (VbDaemon *daemon)
{
  g_message ("vblk: the system bus went away; every device keeps running; reconnecting");
  bus_lost_quietly (daemon);
}

static void
got_authority (GObject *source, GAsyncResult *result, gpointer data)
{
  VbDaemon *daemon = data;
  g_autoptr (GError) error = NULL;
  PolkitAuthority *authority = polkit_authority_get_finish (result, &error);

  if (authority == NULL)
    g_warning ("vblk: polkit unavailable, every change will be refused: %s", error->message);
  else if (daemon->bus->connection == NULL)
    g_object_unref (authority); /* the bus went away again meanwhile */
  else
    {
      g_clear_object (&daemon->bus->authority);
      daemon->bus->authority = authority;
    }
}

/* The state loaded, the objects made (exported once a bus connection is
 * set), the devices brought up: with the name owned, or with no system
 * bus yet (early boot). FALSE: vblkd leaves. */
static gboolean
boot (VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;

  /* with --replace the old vblkd lets go of the state only now */
  if (daemon->desired == NULL && !prepare_state (daemon, TRUE, &error))
    {
      print_startup_error (error);
      daemon->exit_status = 1;
      vb_daemon_quit (daemon);
      return FALSE;
    }
  daemon->bus->object_manager = g_dbus_object_manager_server_new (VB_OBJECT_ROOT);
  vb_manager_export (daemon);
  vb_policy_dbus_export (daemon);
  vb_objects_sync (daemon);
  vb_daemon_submit (daemon, NULL, mutate_boot, VB_OP_STARTUP, NULL, startup_done, NULL, NULL);
  return TRUE;
}

static void
on_name_acquired (GDBusConnection *connection, const char *name, gpointer data)
{
  VbDaemon *daemon = data;
  g_autoptr (GError) error = NULL;

  gboolean first = !daemon->bus->ever_owned;

  daemon->bus->name_owned = TRUE;
  daemon->bus->ever_owned = TRUE;
  if (daemon->bus->object_manager != NULL)
    {
      /* exported before the name was asked for, or owned again after the
       * bus came back: the same objects */
      if (daemon->bus->authority == NULL)
        polkit_authority_get_async (NULL, got_authority, daemon);
      g_dbus_object_manager_server_set_connection (daemon->bus->object_manager, connection);
      vb_objects_sync (daemon);
      if (first)
        g_message ("vblk: owns %s; state %s; instance %s", name, daemon->state_path,
                   daemon->instance);
      else
        g_message ("vblk: owns %s again", name);
      return;
    }
  if (!boot (daemon))
    return;
  g_dbus_object_manager_server_set_connection (daemon->bus->object_manager, connection);
  g_message ("vblk: owns %s; state %s; instance %s", name, daemon->state_path, daemon->instance);
}

static void
on_name_lost (GDBusConnection *connection, const char *name, gpointer data)
{
  VbDaemon *daemon = data;

  if (daemon->bus->object_manager != NULL
      && (connection == NULL || g_dbus_connection_is_closed (connection)))
    {
      bus_lost (daemon);
      return;
    }
  if (daemon->bus->object_manager != NULL && !daemon->bus->name_owned)
    {
      /* serving already (early boot, a takeover), never owned it on this
       * connection: another holds it; leaving would abandon the devices */
      g_warning ("vblk: %s is owned by another process; trying again every second", name);
      bus_lost_quietly (daemon);
      return;
    }
  if (daemon->bus->object_manager != NULL)
    {
      /* we owned it: a vblkd --replace took over; hand over cleanly */
      g_message ("vblk: %s taken over by another vblkd; leaving devices running", name);
      vb_daemon_quit (daemon);
      return;
    }
  if (connection == NULL || opt_takeover)
    {
      /* no system bus yet (early boot, before dbus.service), or the name
       * not free yet after a takeover (whose devices wait for this vblkd):
       * the devices come up now, changes wait for the bus (polkit is on
       * it), and the name is tried again every second */
      if (connection == NULL)
        g_message ("vblk: no system bus yet; starting the devices now and owning %s when it comes",
                   name);
      else
        g_warning ("vblk: could not own the name %s yet; starting the devices now and trying "
                   "again",
                   name);
      if (boot (daemon))
        bus_lost_quietly (daemon);
      return;
    }
  g_printerr ("vblkd: could not own the name %s (another vblkd? --replace takes over)\n", name);
  daemon->exit_status = 1;
  vb_daemon_quit (daemon);
}

static void
own_name (VbDaemon *daemon, GDBusConnection *connection)
{
  g_dbus_connection_set_exit_on_close (connection, FALSE);
  g_set_object (&daemon->bus->connection, connection);
  vb_objects_watch_reads (daemon, connection);
  daemon->bus->owner_id = g_bus_own_name_on_connection (
      connection, VB_BUS_NAME, G_BUS_NAME_OWNER_FLAGS_ALLOW_REPLACEMENT, on_name_acquired,
      on_name_lost, daemon, NULL);
}

/* The instance id and the desired state, checked. */
static gboolean
load_state (VbDaemon *daemon, GError **error)
{
  daemon->instance = vb_state_dir_instance_id (daemon->state_dir, error);
  if (daemon->instance == NULL)
    return FALSE;
  daemon->desired = vb_state_store_load (daemon->store, error);
  if (daemon->desired == NULL)
    goto refuse;
  if (opt_initramfs && !vb_boot_keep_only (daemon->desired, opt_initramfs, error))
    goto refuse;
  if (!vb_state_dir_check (daemon->desired, error))
    {
      g_prefix_error (error, "%s: ", daemon->state_path);
      g_clear_pointer (&daemon->desired, vb_state_free);
      goto refuse;
    }
  return TRUE;
refuse:
  g_prefix_error (error, _ ("refusing to start: "));
  return FALSE;
}

static gboolean
prepare_state (VbDaemon *daemon, gboolean wait, GError **error)
{
  daemon->lock_fd = vb_state_dir_lock (daemon->state_dir,
                                       vb_state_dir_open_lock (daemon->state_dir), wait, error);
  return daemon->lock_fd >= 0 && load_state (daemon, error);
}

static void
record_exit (VbDaemon *daemon)
{
  g_autoptr (GString) s = g_string_new ("clean-exit\n");
  GHashTableIter iter;
  gpointer uuid, running;

  g_hash_table_iter_init (&iter, daemon->running);
  while (g_hash_table_iter_next (&iter, &uuid, &running))
    g_string_append_printf (s, "running %s %s\n", (char *) uuid,
                            ((VbRunning *) running)->block_device);
  g_autofree char *path = g_build_filename (daemon->run_dir, "last-exit", NULL);
  if (!g_file_set_contents (path, s->str, s->len, NULL))
    g_warning ("vblk: cannot write %s", path);
  g_message ("vblk: exiting; %u device(s) left running", g_hash_table_size (daemon->running));
}

#define TAKEOVER_WAIT_MS 30000

static char *
state_dir_of_options (void)
{
  return g_canonicalize_filename (opt_state_dir ? opt_state_dir : VB_DEFAULT_STATE_DIR, NULL);
}

/* The directories from the options; the state dir locked and loaded (for
 * --takeover loaded, its lock opened: take_over locks it). Returns the
 * exit status on failure, 0 otherwise. */
static int
setup_dirs (VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;

  daemon->state_dir = state_dir_of_options ();
  daemon->run_dir = g_canonicalize_filename (opt_run_dir ? opt_run_dir : VB_DEFAULT_RUN_DIR, NULL);
  daemon->dev_dir = g_canonicalize_filename (opt_dev_dir ? opt_dev_dir : VB_DEFAULT_DEV_DIR, NULL);
  daemon->state_path = g_build_filename (daemon->state_dir, VB_STATE_FILE, NULL);
  daemon->store = vb_state_store_new (daemon->state_path);
  daemon->policy_dir
      = g_canonicalize_filename (opt_policy_dir ? opt_policy_dir : VB_DEFAULT_POLICY_DIR, NULL);
  /* the vendor's rules (installed under the data directory) under the
   * administrator's, unless --policy-dir names the only directory */
  {
    const char *dirs[] = { daemon->policy_dir, opt_policy_dir ? NULL : VB_VENDOR_POLICY_DIR, NULL };
    daemon->policy_dirs = g_strdupv ((char **) dirs);
  }

  if (g_mkdir_with_parents (daemon->state_dir, 0700) < 0)
    {
      g_printerr ("vblkd: cannot create %s: %s\n", daemon->state_dir, g_strerror (errno));
      return 1;
    }
  if (opt_takeover)
    {
      daemon->state_stamp = vb_state_stamp (daemon->state_path);
      if ((daemon->lock_fd = vb_state_dir_open_lock (daemon->state_dir)) < 0)
        {
          g_printerr ("vblkd: %s/.lock: %s\n", daemon->state_dir, g_strerror (errno));
          return 1;
        }
    }
  if (opt_takeover ? !load_state (daemon, &error)
                   : !opt_replace && !prepare_state (daemon, FALSE, &error))
    {
      print_startup_error (error);
      return 1;
    }
  return 0;
}

/* The run dir: the boot marker, this vblkd's pid, the last one's exit
 * (after a takeover, recorded by the vblkd that left). */
static int
setup_run_dir (VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *marker = g_build_filename (daemon->run_dir, "booted", NULL);
  g_autofree char *last = g_build_filename (daemon->run_dir, "last-exit", NULL);
  g_autofree char *text = NULL;

  daemon->fresh_run_dir = !g_file_test (marker, G_FILE_TEST_EXISTS);
  if (g_mkdir_with_parents (daemon->run_dir, 0755) < 0
      || (daemon->fresh_run_dir && !g_file_set_contents (marker, "", 0, &error)))
    {
      g_printerr ("vblkd: cannot use run dir %s: %s\n", daemon->run_dir,
                  error ? error->message : g_strerror (errno));
      return 1;
    }
  if (!vb_boot_write_pid (daemon->run_dir, &error))
    g_warning ("vblk: %s (a later vblkd --takeover will not find this one)", error->message);
  if (!daemon->fresh_run_dir)
    g_message ("vblk: previous vblkd %s", g_file_get_contents (last, &text, NULL, NULL)
                                              ? "exited cleanly"
                                              : "did not exit cleanly; re-driving");
  unlink (last);
  return 0;
}

/* --takeover: the vblkd named in the run dir leaves, then this one locks
 * the state dir and goes on. The vblkd that leaves may serve the root file
 * system (an engine device on ublk or nbd): until this one has taken its
 * devices over, a read from the root would wait for this process itself.
 * So everything read from there — the state, the libraries, the policy
 * rules, the lock's file — was read and opened before, and this process's
 * memory is locked (mlockall, as mdmon's) until the devices are up
 * (startup_done). Returns the exit status on failure, 0 otherwise. */
static int
take_over (VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  g_autofree char *stamp = NULL;

  if (mlockall (MCL_CURRENT | MCL_FUTURE) < 0)
    g_warning ("vblk: cannot lock this vblkd in memory (%s): a root served by the vblkd "
               "that leaves may wait on this one",
               g_strerror (errno));
  else
    daemon->memory_locked = TRUE;
  if (!vb_boot_takeover (daemon->run_dir, TAKEOVER_WAIT_MS, &error))
    {
      g_printerr ("vblkd: %s\n", error->message);
      return 1;
    }
  daemon->lock_fd = vb_state_dir_lock (daemon->state_dir, daemon->lock_fd, TRUE, &error);
  if (daemon->lock_fd < 0)
    {
      print_startup_error (error);
      return 1;
    }
  /* the vblkd that left wrote the state meanwhile (a restart, not a boot):
   * read again, from a root it no longer serves */
  stamp = vb_state_stamp (daemon->state_path);
  if (g_strcmp0 (stamp, daemon->state_stamp) != 0)
    {
      g_message ("vblk: %s changed while the other vblkd left; reading it again",
                 daemon->state_path);
      g_clear_pointer (&daemon->desired, vb_state_free);
      g_clear_pointer (&daemon->instance, g_free);
      if (!load_state (daemon, &error))
        {
          print_startup_error (error);
          return 1;
        }
    }
  return 0;
}

/* The tables, the bus side's parts and polkit. */
static void
setup_state (VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  VbBus *bus = daemon->bus;

  daemon->running
      = g_hash_table_new_full (vb_uuid_hash, g_str_equal, g_free, (GDestroyNotify) vb_running_free);
  daemon->reconfigured = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  daemon->status = g_hash_table_new_full (g_str_hash, g_str_equal, g_free,
                                          (GDestroyNotify) vb_device_status_free);
  bus->device_objects = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_object_unref);
  bus->jobs = vb_jobs_new (daemon);
  daemon->exports = vb_exports_new ();
  g_queue_init (&daemon->ops);
  daemon->loop = g_main_loop_new (NULL, FALSE);

  bus->authority = polkit_authority_get_sync (NULL, &error);
  if (bus->authority == NULL)
    g_warning ("vblk: polkit unavailable, every change will be refused: %s", error->message);
}

static void
teardown (VbDaemon *daemon)
{
  VbBus *bus = daemon->bus;

  if (bus->owner_id)
    g_bus_unown_name (bus->owner_id);
  if (bus->reconnect_source)
    g_source_remove (bus->reconnect_source);
  if (daemon->exit_status == 0)
    record_exit (daemon);
  vb_boot_remove_pid (daemon->run_dir);
  g_clear_pointer (&bus->jobs, vb_jobs_free); /* unexports them: before the object manager */
  vb_policy_dbus_shutdown (daemon);
  g_clear_object (&bus->object_manager);
  g_clear_object (&bus->manager);
  g_clear_object (&bus->authority);
  vb_objects_watch_reads (daemon, NULL);
  g_clear_object (&bus->connection);
  g_hash_table_unref (daemon->exports); /* closes every NBD connection */
  g_hash_table_unref (bus->device_objects);
  g_hash_table_unref (daemon->running);
  g_hash_table_unref (daemon->status);
  g_hash_table_unref (daemon->reconfigured);
  g_clear_pointer (&daemon->desired, vb_state_free);
  g_clear_pointer (&daemon->policy, vb_policy_unref);
  g_strfreev (daemon->lingering);
  g_free (daemon->policy_dir);
  g_strfreev (daemon->policy_dirs);
  g_free (daemon->state_dir);
  g_free (daemon->state_path);
  g_free (daemon->state_stamp);
  g_clear_pointer (&daemon->store, vb_state_store_free);
  g_free (daemon->run_dir);
  g_free (daemon->dev_dir);
  g_main_loop_unref (daemon->loop);
  if (daemon->lock_fd >= 0)
    close (daemon->lock_fd);
  g_free (daemon->instance);
}

/* The libraries (engine, backends, metadata) do not log: what they report
 * for an administrator is logged here, in their words, naming the subject. */
static void
log_report (const char *subject, VbReportKind kind, const char *message, gpointer user_data)
{
  if (kind == VB_REPORT_WARNING)
    g_warning ("%s: %s", subject, message);
  else
    g_message ("%s: %s", subject, message);
}

/* --print-state: what a vblkd would load, read while one may be writing
 * (no lock taken). */
static int
print_state (void)
{
  g_autofree char *dir = state_dir_of_options ();
  g_autofree char *path = g_build_filename (dir, VB_STATE_FILE, NULL);
  g_autoptr (GError) error = NULL;
  g_autoptr (VbState) state = vb_state_read (path, &error);
  g_autofree char *text = NULL;

  if (state == NULL)
    {
      g_printerr ("vblkd: %s\n", error->message);
      return 1;
    }
  text = vb_state_to_json (state);
  fputs (text, stdout);
  return fflush (stdout) == 0 ? 0 : 1;
}

int
main (int argc, char **argv)
{
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  VbBus bus = { 0 };
  VbDaemon daemon = { .lock_fd = -1, .bus = &bus, .publish = &vb_bus_publish };
  BDPluginSpec loop_plugin = { BD_PLUGIN_LOOP, NULL };
  BDPluginSpec *plugins[] = { &loop_plugin, NULL };
  int status;

  /* a client or log reader gone must never end the server of a root */
  signal (SIGPIPE, SIG_IGN);
  /* Started by a system bus's activation: that bus is the one to serve
   * (and polkit is asked on), also when it is not at the default address
   * (a private bus); the bus says so only in DBUS_STARTER_*. */
  if (g_strcmp0 (g_getenv ("DBUS_STARTER_BUS_TYPE"), "system") == 0
      && g_getenv ("DBUS_STARTER_ADDRESS") != NULL && g_getenv ("DBUS_SYSTEM_BUS_ADDRESS") == NULL)
    g_setenv ("DBUS_SYSTEM_BUS_ADDRESS", g_getenv ("DBUS_STARTER_ADDRESS"), TRUE);
  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  textdomain (GETTEXT_PACKAGE);

  options_with_defaults ();
  context = g_option_context_new (NULL);
  g_option_context_set_summary (context, _ ("The vblk daemon."));
  g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!g_option_context_parse (context, &argc, &argv, &error))
    {
      g_printerr ("vblkd: %s\n", error->message);
      return 2;
    }
  if (opt_print_state)
    return print_state ();
  if (opt_debug)
    g_setenv ("G_MESSAGES_DEBUG", "all", TRUE);
  main_argv = argv;
  if (opt_initramfs)
    vb_boot_mark_root_storage (argv);
  if ((status = setup_dirs (&daemon)) != 0
      || (!opt_takeover && (status = setup_run_dir (&daemon)) != 0))
    return status;

  bd_switch_init_checks (FALSE, NULL);
  if (!bd_ensure_init (plugins, NULL, &error))
    {
      g_printerr ("vblkd: libblockdev loop plugin: %s\n", error->message);
      return 1;
    }
  setup_state (&daemon);

  vb_policy_dbus_init (&daemon);
  vb_report_set_func (log_report, NULL);
  if (!vb_backends_init (daemon.run_dir, vb_daemon_component_failed, vb_daemon_engine_job, &daemon,
                         &error))
    {
      g_printerr ("vblkd: %s\n", error->message);
      return 1;
    }
  vb_udev_watch (&daemon);
  if (opt_takeover
      && ((status = take_over (&daemon)) != 0 || (status = setup_run_dir (&daemon)) != 0))
    return status;
  g_unix_signal_add (SIGTERM, on_signal, &daemon);
  g_unix_signal_add (SIGINT, on_signal, &daemon);
  g_unix_signal_add (SIGHUP, on_sighup, &daemon);
  g_unix_signal_add (SIGUSR1, on_handover, &daemon);
  g_unix_signal_add (SIGUSR2, on_settle, &daemon);
  bus.owner_id
      = g_bus_own_name (G_BUS_TYPE_SYSTEM, VB_BUS_NAME,
                        G_BUS_NAME_OWNER_FLAGS_ALLOW_REPLACEMENT
                            | (opt_replace || opt_takeover ? G_BUS_NAME_OWNER_FLAGS_REPLACE : 0),
                        on_bus_acquired, on_name_acquired, on_name_lost, &daemon, NULL);
  g_main_loop_run (daemon.loop);
  teardown (&daemon);
  return daemon.exit_status;
}
