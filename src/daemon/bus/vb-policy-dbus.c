/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* org.vblk.VBlk1.Policy at /org/vblk/VBlk1/Policy: the rules in force
 * (Rules, Directory), Reload (also on SIGHUP), and Evaluate, which says
 * what the rules would do with a block device, without acting. Rule files
 * are read and block devices probed (read-only) on worker threads; the
 * rules are swapped on the main thread. */
#include "config.h"

#include <glib/gi18n-lib.h>

#include "vb-auth.h"
#include "vb-policy-dbus.h"
#include "vb-request.h"

#include "metadata.h"
#include "vb-inspect.h"

#include <errno.h>
#include <fcntl.h>
#include <libudev.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define POLICY_PATH VB_OBJECT_ROOT "/Policy"

static VbDBusPolicy *policy_iface; /* exported, or NULL */
static guint64 reloads_started;    /* reloads begun, numbered from 1 */
static guint64 reload_in_force;    /* the newest reload whose rules are in force */

VbPolicy *
vb_daemon_policy (VbDaemon *daemon)
{
  return daemon->policy;
}

static char **
rules_strv (VbPolicy *policy)
{
  guint n = vb_policy_n_rules (policy);
  char **strv = g_new0 (char *, n + 1);

  for (guint i = 0; i < n; i++)
    strv[i] = vb_policy_rule_to_string (vb_policy_rule (policy, i));
  return strv;
}

static void
publish_rules (VbDaemon *daemon)
{
  g_auto (GStrv) rules = NULL;

  if (policy_iface == NULL)
    return;
  rules = rules_strv (daemon->policy);
  vb_dbus_policy_set_rules (policy_iface, (const char *const *) rules);
}

/* Takes @policy. */
static void
set_policy (VbDaemon *daemon, VbPolicy *policy)
{
  g_clear_pointer (&daemon->policy, vb_policy_unref);
  daemon->policy = policy;
  publish_rules (daemon);
}

void
vb_policy_dbus_init (VbDaemon *daemon)
{
  g_autoptr (GError) error = NULL;
  VbPolicy *policy;

  g_return_if_fail (daemon->policy_dir != NULL && daemon->policy_dirs != NULL);

  policy = vb_policy_load_dirs ((const char *const *) daemon->policy_dirs, &error);
  if (policy == NULL)
    {
      g_warning ("vblk: policy: %s: %s; running with no rules until it is fixed and reloaded",
                 daemon->policy_dir, error->message);
      policy = vb_policy_new_empty ();
    }
  else
    g_message ("vblk: policy: %u rule(s) from %s%s%s", vb_policy_n_rules (policy),
               daemon->policy_dir, daemon->policy_dirs[1] ? " and " : "",
               daemon->policy_dirs[1] ? daemon->policy_dirs[1] : "");
  set_policy (daemon, policy);
}

/* Reload */

typedef struct {
  VbDaemon *daemon;
  GDBusMethodInvocation *invocation; /* NULL: SIGHUP */
  char *dir;
  char **dirs;
  guint64 number;
} ReloadRequest;

static void
reload_request_free (ReloadRequest *req)
{
  g_clear_object (&req->invocation);
  g_free (req->dir);
  g_strfreev (req->dirs);
  g_free (req);
}

static void
reload_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  ReloadRequest *req = task_data;
  GError *error = NULL;
  VbPolicy *policy = vb_policy_load_dirs ((const char *const *) req->dirs, &error);

  if (policy == NULL)
    g_task_return_error (task, error);
  else
    g_task_return_pointer (task, policy, (GDestroyNotify) vb_policy_unref);
}

static void
reload_done (GObject *source, GAsyncResult *result, gpointer user_data)
{
  ReloadRequest *req = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;
  VbPolicy *policy = g_task_propagate_pointer (G_TASK (result), &error);
  const char *why = req->invocation ? "Reload" : "SIGHUP";

  if (policy == NULL)
    {
      g_warning ("vblk: policy: reload (%s) of %s failed; the rules in force stay: %s", why,
                 req->dir, error->message);
      if (req->invocation)
        vb_invocation_return_gerror (req->invocation, error);
      return;
    }
  /* Two reloads may overlap: the one begun last read the newest files. */
  if (req->number > reload_in_force)
    {
      g_message ("vblk: policy: reloaded (%s): %u rule(s) from %s", why, vb_policy_n_rules (policy),
                 req->dir);
      reload_in_force = req->number;
      set_policy (req->daemon, policy);
    }
  else
    vb_policy_unref (policy);
  if (req->invocation)
    g_dbus_method_invocation_return_value (req->invocation, NULL);
}

static void
reload_start (VbDaemon *daemon, GDBusMethodInvocation *invocation)
{
  ReloadRequest *req = g_new0 (ReloadRequest, 1);
  g_autoptr (GTask) task = g_task_new (NULL, NULL, reload_done, NULL);

  req->daemon = daemon;
  req->invocation = invocation ? g_object_ref (invocation) : NULL;
  req->dir = g_strdup (daemon->policy_dir);
  req->dirs = g_strdupv (daemon->policy_dirs);
  req->number = ++reloads_started;
  g_task_set_task_data (task, req, (GDestroyNotify) reload_request_free);
  g_task_run_in_thread (task, reload_thread);
}

void
vb_policy_dbus_reload_sync (VbDaemon *daemon)
{
  g_message ("vblk: policy: reloading %s", daemon->policy_dir);
  reload_start (daemon, NULL);
}

static const char *const reload_options[] = { NULL };

static void
reload_authorized (VbDaemon *daemon, GDBusMethodInvocation *invocation, gpointer user_data)
{
  GVariant *options = user_data;
  g_autoptr (GError) error = NULL;

  if (!vb_options_check (options, reload_options, &error))
    vb_invocation_return_gerror (invocation, error);
  else
    reload_start (daemon, invocation);
  g_variant_unref (options);
}

static gboolean
handle_reload (VbDBusPolicy *iface, GDBusMethodInvocation *invocation, GVariant *options,
               VbDaemon *daemon)
{
  vb_auth_check (daemon, invocation, "org.vblk.policy", NULL, reload_authorized,
                 g_variant_ref (options), (GDestroyNotify) g_variant_unref);
  return TRUE;
}

/* Evaluate */

static const char *const evaluate_options[]
    = { "devnode:s", "size:t", "metadata:s", "device-uuid:s", "device-name:s", NULL };

typedef struct {
  VbDaemon *daemon;
  GDBusMethodInvocation *invocation;
  GHashTable *properties; /* probed, then the caller's on top */
  GHashTable *given;      /* the caller's udev_properties */
  char *devnode;
  gboolean have_size;
  guint64 size;
  char *metadata;
  char *device_uuid;
  char *device_name;
  /* probed (worker thread) */
  gboolean probed_vblk;
  gboolean probed_bad; /* a handler recognized it but could not read it */
  char *vblk_node;     /* a node vblk made or built on one: never taken */
  char *probed_uuid;
  char *probed_name;
  guint64 probed_size;
  char *problem; /* e.g. a vblk superblock that does not read */
} EvaluateRequest;

static void
evaluate_request_free (EvaluateRequest *req)
{
  g_clear_object (&req->invocation);
  g_clear_pointer (&req->properties, g_hash_table_unref);
  g_clear_pointer (&req->given, g_hash_table_unref);
  g_free (req->devnode);
  g_free (req->metadata);
  g_free (req->device_uuid);
  g_free (req->device_name);
  g_free (req->probed_uuid);
  g_free (req->probed_name);
  g_free (req->vblk_node);
  g_free (req->problem);
  g_free (req);
}

static gboolean
has_signature (GHashTable *properties)
{
  const char *fs = g_hash_table_lookup (properties, "ID_FS_TYPE");
  const char *table = g_hash_table_lookup (properties, "ID_PART_TABLE_TYPE");

  return (fs != NULL && *fs != '\0') || (table != NULL && *table != '\0');
}

static gboolean
probe_udev (EvaluateRequest *req, dev_t devnum, GError **error)
{
  struct udev *udev = udev_new ();
  struct udev_device *dev;
  struct udev_list_entry *entry;

  if (udev == NULL)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("devnode '%s': no udev context"),
                   req->devnode);
      return FALSE;
    }
  dev = udev_device_new_from_devnum (udev, 'b', devnum);
  if (dev == NULL)
    {
      /* a node udev does not know: nothing to add, no error */
      req->problem = g_strdup_printf ("'%s': udev knows no device %u:%u", req->devnode,
                                      major (devnum), minor (devnum));
      udev_unref (udev);
      return TRUE;
    }
  for (entry = udev_device_get_properties_list_entry (dev); entry != NULL;
       entry = udev_list_entry_get_next (entry))
    g_hash_table_replace (req->properties, g_strdup (udev_list_entry_get_name (entry)),
                          g_strdup (udev_list_entry_get_value (entry)));
  udev_device_unref (dev);
  udev_unref (udev);
  return TRUE;
}

/* The first handler that recognizes @devnode reads its superblock. */
static void
probe_metadata (EvaluateRequest *req)
{
  for (const VbMetadataHandler *const *h = vb_metadata_handlers (); *h; h++)
    {
      g_autoptr (GError) error = NULL;
      VbSuperblock sb;

      if (!(*h)->probe (-1, req->devnode))
        continue;
      if (!(*h)->read (-1, req->devnode, &sb, &error))
        {
          req->probed_bad = TRUE;
          g_free (req->problem);
          req->problem = g_strdup_printf ("%s metadata: %s", (*h)->name, error->message);
          return;
        }
      req->probed_vblk = TRUE;
      req->probed_uuid = g_strdup (sb.device_uuid);
      req->probed_name = g_strdup (sb.device_name);
      return;
    }
}

/* Read-only, so that no change uevent follows (DESIGN.md, lessons). */
static gboolean
probe_devnode (EvaluateRequest *req, GError **error)
{
  struct stat st;
  int fd, errsv;

  if (stat (req->devnode, &st) < 0)
    {
      errsv = errno;
      g_set_error (error, VB_ERROR, errsv == ENOENT ? VB_ERROR_NOT_FOUND : VB_ERROR_FAILED,
                   _ ("option 'devnode': '%s': %s"), req->devnode, g_strerror (errsv));
      return FALSE;
    }
  if (!S_ISBLK (st.st_mode))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'devnode': '%s' is not a block device"), req->devnode);
      return FALSE;
    }
  fd = open (req->devnode, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ioctl (fd, BLKGETSIZE64, &req->probed_size) < 0)
    {
      errsv = errno;
      if (fd >= 0)
        close (fd);
      g_set_error (error, VB_ERROR, VB_ERROR_FAILED, _ ("devnode '%s': size: %s"), req->devnode,
                   g_strerror (errsv));
      return FALSE;
    }
  close (fd);
  vb_inspect_is_vblk_node (st.st_rdev, &req->vblk_node);
  if (!probe_udev (req, st.st_rdev, error))
    return FALSE;
  probe_metadata (req);
  return TRUE;
}

static void
evaluate_thread (GTask *task, gpointer source, gpointer task_data, GCancellable *cancellable)
{
  EvaluateRequest *req = task_data;
  GError *error = NULL;

  if (!probe_devnode (req, &error))
    g_task_return_error (task, error);
  else
    g_task_return_boolean (task, TRUE);
}

static void
add_string_or_null (JsonBuilder *b, const char *member, const char *value)
{
  json_builder_set_member_name (b, member);
  if (value)
    json_builder_add_string_value (b, value);
  else
    json_builder_add_null_value (b);
}

static void
add_input (JsonBuilder *b, EvaluateRequest *req, const VbPolicyInput *in)
{
  g_autofree gpointer *keys = NULL;
  guint n = 0;

  json_builder_set_member_name (b, "input");
  json_builder_begin_object (b);
  add_string_or_null (b, "devnode", req->devnode);
  json_builder_set_member_name (b, "size");
  json_builder_add_int_value (b, (gint64) in->size);
  add_string_or_null (b, "metadata", in->metadata);
  add_string_or_null (b, "device_uuid", in->device_uuid);
  add_string_or_null (b, "device_name", in->device_name);
  json_builder_set_member_name (b, "properties");
  json_builder_begin_object (b);
  keys = g_hash_table_get_keys_as_array (in->properties, &n);
  qsort (keys, n, sizeof (gpointer), vb_compare_string_pointers);
  for (guint i = 0; i < n; i++)
    {
      json_builder_set_member_name (b, keys[i]);
      json_builder_add_string_value (b, g_hash_table_lookup (in->properties, keys[i]));
    }
  json_builder_end_object (b);
  if (req->problem)
    add_string_or_null (b, "problem", req->problem);
  json_builder_end_object (b);
}

static char *
decision_json (EvaluateRequest *req, const VbPolicyInput *in, const VbPolicyRule *rule,
               const char *why)
{
  g_autoptr (JsonBuilder) b = json_builder_new ();
  g_autoptr (JsonGenerator) generator = json_generator_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_object (b);
  add_string_or_null (b, "rule", rule ? rule->name : NULL);
  json_builder_set_member_name (b, "action");
  json_builder_add_string_value (b, rule ? vb_policy_action_to_string (rule->action) : "none");
  add_string_or_null (b, "file", rule ? rule->file : NULL);
  json_builder_set_member_name (b, "line");
  if (rule)
    json_builder_add_int_value (b, rule->line);
  else
    json_builder_add_null_value (b);
  json_builder_set_member_name (b, "why");
  json_builder_add_string_value (b, why ? why : "");
  json_builder_set_member_name (b, "devices");
  if (rule && rule->devices)
    {
      json_builder_begin_array (b);
      for (guint i = 0; rule->devices[i]; i++)
        json_builder_add_string_value (b, rule->devices[i]);
      json_builder_end_array (b);
    }
  else
    json_builder_add_null_value (b);
  add_string_or_null (b, "domain", rule ? rule->domain : NULL);
  json_builder_set_member_name (b, "start_degraded_after_ms");
  json_builder_add_int_value (b, rule ? (gint64) rule->start_degraded_after_ms : 0);
  add_input (b, req, in);
  json_builder_end_object (b);

  root = json_builder_get_root (b);
  json_generator_set_root (generator, root);
  return json_generator_to_data (generator, NULL);
}

/* The caller's word first, then the probe's, then the udev signature. */
static const char *
evaluate_metadata (EvaluateRequest *req)
{
  if (req->metadata)
    return req->metadata;
  if (req->probed_vblk || (req->devnode == NULL && req->device_uuid != NULL))
    return "vblk";
  if (req->probed_bad) /* it says vblk but does not read: touch nothing */
    return "unknown";
  return has_signature (req->properties) ? "unknown" : "none";
}

/* Main thread: what the caller gave, then what was probed, then defaults. */
static void
evaluate_finish (EvaluateRequest *req)
{
  VbPolicyInput in = { 0 };
  GHashTableIter iter;
  gpointer key, value;
  g_autofree char *why = NULL;
  g_autofree char *json = NULL;
  const VbPolicyRule *rule;

  g_hash_table_iter_init (&iter, req->given);
  while (g_hash_table_iter_next (&iter, &key, &value))
    g_hash_table_replace (req->properties, g_strdup (key), g_strdup (value));

  in.properties = req->properties;
  in.size = req->have_size ? req->size : req->probed_size;
  in.device_uuid = req->device_uuid ? req->device_uuid : req->probed_uuid;
  in.device_name = req->device_name ? req->device_name : req->probed_name;
  in.metadata = evaluate_metadata (req);

  /* as hotplug sees it: vblk's own nodes are no disks for the rules */
  if (req->vblk_node)
    {
      rule = NULL;
      why = g_strdup_printf ("%s: never a disk for the rules", req->vblk_node);
    }
  else
    rule = vb_policy_evaluate (req->daemon->policy, &in, &why);
  g_debug ("vblk: policy: evaluate %s: %s (%s)", req->devnode ? req->devnode : "(properties)",
           rule ? rule->name : "no rule", why ? why : "");
  json = decision_json (req, &in, rule, why);
  g_dbus_method_invocation_return_value (req->invocation, g_variant_new ("(s)", json));
  g_clear_object (&req->invocation);
}

static void
evaluate_probed (GObject *source, GAsyncResult *result, gpointer user_data)
{
  EvaluateRequest *req = g_task_get_task_data (G_TASK (result));
  g_autoptr (GError) error = NULL;

  if (!g_task_propagate_boolean (G_TASK (result), &error))
    {
      vb_invocation_return_gerror (req->invocation, error);
      g_clear_object (&req->invocation);
      return;
    }
  evaluate_finish (req);
}

static gboolean
evaluate_parse (EvaluateRequest *req, GVariant *options, GError **error)
{
  if (!vb_options_check (options, evaluate_options, error))
    return FALSE;
  req->have_size = g_variant_lookup (options, "size", "t", &req->size);
  if (g_variant_lookup (options, "devnode", "s", &req->devnode)
      && !g_path_is_absolute (req->devnode))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'devnode': '%s' is not an absolute path"), req->devnode);
      return FALSE;
    }
  if (g_variant_lookup (options, "metadata", "s", &req->metadata)
      && g_strcmp0 (req->metadata, "vblk") != 0 && g_strcmp0 (req->metadata, "none") != 0
      && g_strcmp0 (req->metadata, "unknown") != 0)
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'metadata': '%s' is not one of vblk, none, unknown"), req->metadata);
      return FALSE;
    }
  if (g_variant_lookup (options, "device-uuid", "s", &req->device_uuid)
      && !vb_uuid_is_valid (req->device_uuid))
    {
      g_set_error (error, VB_ERROR, VB_ERROR_INVALID_ARGUMENT,
                   _ ("option 'device-uuid': '%s' is not a UUID"), req->device_uuid);
      return FALSE;
    }
  if (g_variant_lookup (options, "device-name", "s", &req->device_name)
      && !vb_name_is_valid (req->device_name, "option 'device-name'", error))
    return FALSE;
  return TRUE;
}

static gboolean
handle_evaluate (VbDBusPolicy *iface, GDBusMethodInvocation *invocation, GVariant *udev_properties,
                 GVariant *options, VbDaemon *daemon)
{
  EvaluateRequest *req = g_new0 (EvaluateRequest, 1);
  g_autoptr (GError) error = NULL;
  g_autoptr (GTask) task = NULL;

  /* reads only: no authorization (vblkd probes as root, read-only) */
  req->daemon = daemon;
  req->invocation = g_object_ref (invocation);
  req->given = vb_attributes_from_variant (udev_properties);
  req->properties = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, g_free);
  if (!evaluate_parse (req, options, &error))
    {
      vb_invocation_return_gerror (invocation, error);
      evaluate_request_free (req);
      return TRUE;
    }
  if (req->devnode == NULL)
    {
      evaluate_finish (req);
      evaluate_request_free (req);
      return TRUE;
    }
  task = g_task_new (NULL, NULL, evaluate_probed, NULL);
  g_task_set_task_data (task, req, (GDestroyNotify) evaluate_request_free);
  g_task_run_in_thread (task, evaluate_thread);
  return TRUE;
}

void
vb_policy_dbus_export (VbDaemon *daemon)
{
  g_autoptr (VbDBusObjectSkeleton) object = vb_dbus_object_skeleton_new (POLICY_PATH);

  g_return_if_fail (policy_iface == NULL);

  policy_iface = vb_dbus_policy_skeleton_new ();
  vb_dbus_policy_set_directory (policy_iface, daemon->policy_dir);
  publish_rules (daemon);
  g_signal_connect (policy_iface, "handle-reload", G_CALLBACK (handle_reload), daemon);
  g_signal_connect (policy_iface, "handle-evaluate", G_CALLBACK (handle_evaluate), daemon);
  vb_dbus_object_skeleton_set_policy (object, policy_iface);
  g_dbus_object_manager_server_export (daemon->bus->object_manager,
                                       G_DBUS_OBJECT_SKELETON (object));
}

void
vb_policy_dbus_shutdown (VbDaemon *daemon)
{
  if (policy_iface == NULL)
    return;
  if (daemon->bus->object_manager)
    g_dbus_object_manager_server_unexport (daemon->bus->object_manager, POLICY_PATH);
  g_clear_object (&policy_iface);
}
