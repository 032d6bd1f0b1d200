/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr, the command-line client of vblkd: argument dispatch and the
 * helpers every command shares (connecting, calling, error reporting with
 * the exit codes of DESIGN.md). One file per command group: cmd-*.c. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>
#include <locale.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "vb-error.h"
#include "vb-util.h"

static const VbMgrCommand vb_mgr_commands[] = {
  { "list", "[--json]", N_ ("List the devices"), vb_cmd_list },
  { "show", "NAME [--json]", N_ ("Show one device"), vb_cmd_show },
  { "status", "[NAME...] [--json]",
    N_ ("Say whether each device holds every copy it should (exit status 0, 3 or 4)"),
    vb_cmd_status },
  { "create",
    "NAME --driver D [--attr K=V]... [--backend B] [--start] "
    "[--no-autostart] COMPONENT...",
    N_ ("Create a device"), vb_cmd_create },
  { "set", "NAME K=V...", N_ ("Change attributes of a device"), vb_cmd_set },
  { "add", "NAME COMPONENT [--spare]", N_ ("Add a component to a device"), vb_cmd_add },
  { "start", "NAME [--recursive]", N_ ("Start a device"), vb_cmd_start },
  { "stop", "NAME [--recursive]", N_ ("Stop a device"), vb_cmd_stop },
  { "delete", "NAME [--recursive]", N_ ("Delete a device"), vb_cmd_delete },
  { "reconfigure",
    "NAME [--driver D] [--attr K=V]... [--add COMPONENT]... [--remove COMPONENT]... "
    "[--backend B] [--timeout MS]",
    N_ ("Change the driver or components of a device, online"), vb_cmd_reconfigure },
  { "apply", "FILE|- [--dry-run] [--prune] [--confirm ID]... [--json]",
    N_ ("Make the desired state what a spec says, all or nothing"), vb_cmd_apply },
  { "dump", "", N_ ("Print the desired state as a spec (what apply takes)"), vb_cmd_dump },
  { "graph", "[--dot] [--json]", N_ ("Show which devices are built on which"), vb_cmd_graph },
  { "fail", "NAME COMPONENT", N_ ("Mark a component of a redundant device faulty"), vb_cmd_fail },
  { "remove", "NAME COMPONENT", N_ ("Remove a spare, or a component a spare replaced"),
    vb_cmd_remove },
  { "check", "NAME|--all [--repair]", N_ ("Compare the copies of a redundant device"),
    vb_cmd_check },
  { "export", "NAME --nbd [--listen unix:PATH|tcp:HOST:PORT] [--tls MODE --tls-psk FILE]",
    N_ ("Serve a device over NBD"), vb_cmd_export },
  { "jobs", "[--json]", N_ ("List the jobs (resync, rebuild, check, repair)"), vb_cmd_jobs },
  { "wait", "NAME|JOB [--state STATE] [--timeout SECONDS] [--json]",
    N_ ("Wait until a job has ended, no job of a device runs, or a device is in a state"),
    vb_cmd_wait },
  { "cancel", "JOB", N_ ("Ask a job to stop"), vb_cmd_cancel },
  { "examine", "PATH [--json|--udev]", N_ ("Print the vblk superblock of a component (no daemon)"),
    vb_cmd_examine },
  { "scan", "[--adopt [--start]] [--json] [PATH...]",
    N_ ("Find devices from their components' superblocks; --adopt adds the unknown ones"),
    vb_cmd_scan },
  { "wipe", "PATH [--force] [--md]", N_ ("Erase vblk's superblock and bitmap from a disk"),
    vb_cmd_wipe },
  { "monitor", "[--json] [--program CMD]",
    N_ ("Print the events of vblkd as they happen (and run CMD for each), until interrupted"),
    vb_cmd_monitor },
  { "drivers", "[--json]", N_ ("List the drivers and their attributes"), vb_cmd_drivers },
  { "backends", "[--json]", N_ ("List the backends, available or why not"), vb_cmd_backends },
  { "policy", "list [--json] | test DEVICE|--prop K=V… [--json] | reload",
    N_ ("List, try or reload the policy rules"), vb_cmd_policy },
};

static char *
vb_mgr_commands_text (void)
{
  GString *text = g_string_new (NULL);

  g_string_append_printf (text, "%s\n\n%s\n", _ ("Usage: vbmgr COMMAND [ARGUMENT...]"),
                          _ ("Commands:"));
  for (gsize i = 0; i < G_N_ELEMENTS (vb_mgr_commands); i++)
    {
      const VbMgrCommand *c = &vb_mgr_commands[i];

      g_string_append_printf (text, "  %s %s\n      %s\n", c->name, c->parameters, _ (c->summary));
    }
  g_string_append_printf (text, "\n%s\n",
                          _ ("Run 'vbmgr COMMAND --help' for the options of a command."));
  return g_string_free (text, FALSE);
}

int
vb_mgr_usage_error (const char *command, const char *format, ...)
{
  g_autofree char *message = NULL;
  va_list args;

  va_start (args, format);
  message = g_strdup_vprintf (format, args);
  va_end (args);

  if (command != NULL)
    {
      /* "vbmgr: usage:" stays untranslated: scripts match it. */
      g_printerr ("vbmgr: usage: %s: %s\n", command, message);
      g_printerr (_ ("Run 'vbmgr %s --help' for its usage.\n"), command);
    }
  else
    {
      g_printerr ("vbmgr: usage: %s\n", message);
      g_printerr (_ ("Run 'vbmgr --help' for the list of commands.\n"));
    }
  return VB_EXIT_USAGE;
}

gboolean
vb_mgr_parse_options (const char *command, const char *parameters, const char *summary,
                      const GOptionEntry *entries, int *argc, char ***argv)
{
  g_autoptr (GOptionContext) context = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *prgname = g_strdup_printf ("vbmgr %s", command);

  /* The --help usage line is "PRGNAME [OPTION…] PARAMETERS". */
  g_set_prgname (prgname);
  context = g_option_context_new (parameters);
  g_option_context_set_translation_domain (context, GETTEXT_PACKAGE);
  g_option_context_set_summary (context, summary);
  if (entries != NULL)
    g_option_context_add_main_entries (context, entries, GETTEXT_PACKAGE);
  if (!g_option_context_parse (context, argc, argv, &error))
    {
      vb_mgr_usage_error (command, "%s", error->message);
      return FALSE;
    }
  g_set_prgname ("vbmgr");
  /* GOption leaves the "--" that ends the options in argv. */
  for (int i = 1; i < *argc; i++)
    if (strcmp ((*argv)[i], "--") == 0)
      {
        memmove (&(*argv)[i], &(*argv)[i + 1], (*argc - i) * sizeof (char *));
        (*argc)--;
        break;
      }
  return TRUE;
}

/* The daemon is not there (no bus, nobody owns the name, it went away). */
static gboolean
vb_mgr_error_is_unreachable (const GError *error)
{
  return g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN)
         || g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER)
         || g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_REPLY)
         || g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_DISCONNECTED)
         || g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NO_SERVER)
         || g_error_matches (error, G_IO_ERROR, G_IO_ERROR_CLOSED);
}

static int
vb_mgr_unreachable (const char *message)
{
  g_autofree char *text = g_strdup_printf (_ ("cannot reach vblkd: %s"), message);

  g_printerr ("vbmgr: %s\n", text);
  return VB_EXIT_FAILED;
}

int
vb_mgr_fail (const char *command, const char *target, GError *error)
{
  g_autofree char *remote = NULL;
  g_autofree char *what = NULL;
  const char *short_name = "Failed";

  if (vb_mgr_error_is_unreachable (error))
    {
      g_dbus_error_strip_remote_error (error);
      return vb_mgr_unreachable (error->message);
    }

  if (g_dbus_error_is_remote_error (error))
    {
      remote = g_dbus_error_get_remote_error (error);
      g_dbus_error_strip_remote_error (error);
    }

  /* VB_ERROR is registered with its D-Bus names (vb_error_quark), so a
   * vblkd error arrives in our own domain. */
  if (error->domain == VB_ERROR && vb_error_short_name (error->code) != NULL)
    short_name = vb_error_short_name (error->code);
  else if (g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_ACCESS_DENIED)
           || g_error_matches (error, G_IO_ERROR, G_IO_ERROR_PERMISSION_DENIED))
    short_name = "NotAuthorized"; /* the bus policy refused before vblkd */
  else if (g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT))
    short_name = "NotFound"; /* the object went away since we looked */
  else if (remote != NULL && strrchr (remote, '.') != NULL)
    short_name = strrchr (remote, '.') + 1;

  what = target != NULL ? g_strdup_printf ("%s %s", command, target) : g_strdup (command);
  g_printerr ("vbmgr: %s: %s: %s\n", what, short_name, error->message);
  return VB_EXIT_FAILED;
}

static void
no_owner (void)
{
  g_autofree char *message
      = g_strdup_printf (_ ("no process owns %s on the system bus"), VB_BUS_NAME);

  vb_mgr_unreachable (message);
}

GDBusObjectManager *
vb_mgr_connect (void)
{
  g_autoptr (GError) error = NULL;
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autofree char *owner = NULL;

  /* Without DO_NOT_AUTO_START, the bus activates vblkd when it can. */
  manager = vb_dbus_object_manager_client_new_for_bus_sync (
      G_BUS_TYPE_SYSTEM, G_DBUS_OBJECT_MANAGER_CLIENT_FLAGS_NONE, VB_BUS_NAME, VB_OBJECT_ROOT, NULL,
      &error);
  if (manager == NULL)
    {
      g_dbus_error_strip_remote_error (error);
      vb_mgr_unreachable (error->message);
      return NULL;
    }
  owner = g_dbus_object_manager_client_get_name_owner (G_DBUS_OBJECT_MANAGER_CLIENT (manager));
  if (owner == NULL)
    {
      no_owner ();
      return NULL;
    }
  return g_steal_pointer (&manager);
}

GVariant *
vb_mgr_read (const char *command, const char *path, const char *interface, const char *method,
             GVariant *parameters, const GVariantType *reply_type)
{
  g_autoptr (GVariant) sunk = parameters ? g_variant_ref_sink (parameters) : NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (GDBusConnection) bus = g_bus_get_sync (G_BUS_TYPE_SYSTEM, NULL, &error);
  g_autoptr (GVariant) reply = NULL;

  /* Without NO_AUTO_START, the bus activates vblkd when it can. */
  if (bus != NULL)
    reply = g_dbus_connection_call_sync (bus, VB_BUS_NAME, path, interface, method, sunk,
                                         reply_type, G_DBUS_CALL_FLAGS_NONE, -1, NULL, &error);
  /* nobody owns the name and the bus cannot start it: said as the
   * object manager's client says it (vb_mgr_connect) */
  if (bus == NULL)
    vb_mgr_unreachable (error->message); /* no system bus */
  else if (g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_SERVICE_UNKNOWN)
           || g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_NAME_HAS_NO_OWNER))
    no_owner ();
  else if (reply == NULL)
    vb_mgr_fail (command, NULL, error);
  return reply ? g_variant_get_child_value (reply, 0) : NULL;
}

VbDBusDevice *
vb_mgr_lookup_device (GDBusObjectManager *manager, const char *command, const char *name)
{
  g_autofree char *path = NULL;
  g_autoptr (GDBusObject) object = NULL;
  VbDBusDevice *device = NULL;

  if (name != NULL && *name != '\0')
    path = vb_device_object_path (name);
  if (path != NULL && g_variant_is_object_path (path))
    object = g_dbus_object_manager_get_object (manager, path);
  if (object != NULL)
    device = vb_dbus_object_get_device (VB_DBUS_OBJECT (object));
  if (device == NULL)
    {
      g_autofree char *text = g_strdup_printf (_ ("no device named '%s'"), name);

      g_printerr ("vbmgr: %s %s: NotFound: %s\n", command, name, text);
    }
  return device;
}

VbDBusDevice *
vb_mgr_get_device (const char *command, const char *name)
{
  g_autofree char *path = name && *name ? vb_device_object_path (name) : NULL;
  g_autoptr (GError) error = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  g_autofree char *owner = NULL;

  if (path != NULL && g_variant_is_object_path (path))
    {
      /* Without DO_NOT_AUTO_START, the bus activates vblkd when it can. */
      device = vb_dbus_device_proxy_new_for_bus_sync (G_BUS_TYPE_SYSTEM, G_DBUS_PROXY_FLAGS_NONE,
                                                      VB_BUS_NAME, path, NULL, &error);
      if (device == NULL)
        {
          g_dbus_error_strip_remote_error (error);
          vb_mgr_unreachable (error->message);
          return NULL;
        }
      owner = g_dbus_proxy_get_name_owner (G_DBUS_PROXY (device));
      if (owner == NULL)
        {
          no_owner ();
          return NULL;
        }
    }
  /* An object that is not there has no properties; nor has one whose
   * properties could not be read (a timeout, vblkd gone): asked again,
   * the bus says which. */
  if (device != NULL && vb_dbus_device_get_name (device) == NULL)
    {
      g_autoptr (GVariant) name_value = g_dbus_connection_call_sync (
          g_dbus_proxy_get_connection (G_DBUS_PROXY (device)), VB_BUS_NAME, path,
          "org.freedesktop.DBus.Properties", "Get",
          g_variant_new ("(ss)", g_dbus_proxy_get_interface_name (G_DBUS_PROXY (device)), "Name"),
          G_VARIANT_TYPE ("(v)"), G_DBUS_CALL_FLAGS_NO_AUTO_START, -1, NULL, &error);
      if (name_value == NULL && !g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_METHOD)
          && !g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_OBJECT)
          && !g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_UNKNOWN_INTERFACE)
          && !g_error_matches (error, G_DBUS_ERROR, G_DBUS_ERROR_INVALID_ARGS))
        {
          vb_mgr_fail (command, name, error);
          return NULL;
        }
    }
  if (device == NULL || vb_dbus_device_get_name (device) == NULL)
    {
      g_autofree char *text = g_strdup_printf (_ ("no device named '%s'"), name);

      g_printerr ("vbmgr: %s %s: NotFound: %s\n", command, name, text);
      return NULL;
    }
  return g_steal_pointer (&device);
}

VbDBusManager *
vb_mgr_get_manager (GDBusObjectManager *manager, const char *command, const char *target)
{
  g_autoptr (GDBusObject) object = NULL;
  VbDBusManager *iface = NULL;

  object = g_dbus_object_manager_get_object (manager, VB_OBJECT_ROOT "/Manager");
  if (object != NULL)
    iface = vb_dbus_object_get_manager (VB_DBUS_OBJECT (object));
  if (iface == NULL)
    {
      g_autoptr (GError) error = g_error_new (
          VB_ERROR, VB_ERROR_FAILED, _ ("vblkd exports no %s object"), VB_OBJECT_ROOT "/Manager");
      vb_mgr_fail (command, target, error);
    }
  return iface;
}

VbDBusComponent *
vb_mgr_lookup_component (GDBusObjectManager *manager, const char *path)
{
  g_autoptr (GDBusObject) object = NULL;

  if (path == NULL || !g_variant_is_object_path (path))
    return NULL;
  if (manager == NULL)
    {
      g_autoptr (VbDBusComponent) component = vb_dbus_component_proxy_new_for_bus_sync (
          G_BUS_TYPE_SYSTEM, G_DBUS_PROXY_FLAGS_DO_NOT_AUTO_START, VB_BUS_NAME, path, NULL, NULL);
      g_auto (GStrv) names
          = component ? g_dbus_proxy_get_cached_property_names (G_DBUS_PROXY (component)) : NULL;

      /* gone meanwhile: no properties, as the object manager would not have it */
      return names != NULL ? g_steal_pointer (&component) : NULL;
    }
  object = g_dbus_object_manager_get_object (manager, path);
  if (object == NULL)
    return NULL;
  return vb_dbus_object_get_component (VB_DBUS_OBJECT (object));
}

static gint
vb_mgr_compare_devices (gconstpointer a, gconstpointer b)
{
  VbDBusDevice *da = *(VbDBusDevice *const *) a;
  VbDBusDevice *db = *(VbDBusDevice *const *) b;

  return g_strcmp0 (vb_dbus_device_get_name (da), vb_dbus_device_get_name (db));
}

GPtrArray *
vb_mgr_list_devices (GDBusObjectManager *manager)
{
  GPtrArray *devices = g_ptr_array_new_with_free_func (g_object_unref);
  GList *objects = g_dbus_object_manager_get_objects (manager);

  for (GList *l = objects; l != NULL; l = l->next)
    {
      VbDBusDevice *device = vb_dbus_object_get_device (VB_DBUS_OBJECT (l->data));

      if (device != NULL)
        g_ptr_array_add (devices, device);
    }
  g_list_free_full (objects, g_object_unref);
  g_ptr_array_sort (devices, vb_mgr_compare_devices);
  return devices;
}

char *
vb_mgr_device_name_from_path (GDBusObjectManager *manager, const char *path)
{
  g_autoptr (GDBusObject) object = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  const char *slash;

  if (manager != NULL && g_variant_is_object_path (path))
    object = g_dbus_object_manager_get_object (manager, path);
  if (object != NULL)
    device = vb_dbus_object_get_device (VB_DBUS_OBJECT (object));
  if (device != NULL && vb_dbus_device_get_name (device) != NULL)
    return g_strdup (vb_dbus_device_get_name (device));
  slash = strrchr (path, '/');
  return vb_object_path_unescape (slash != NULL ? slash + 1 : path);
}

GVariant *
vb_mgr_call (gpointer proxy, const char *method, GVariant *parameters, GError **error)
{
  GDBusCallFlags flags = G_DBUS_CALL_FLAGS_NONE;

  /* polkit may ask for a password only when someone can type it. The
   * generated _sync wrappers take no flags, hence the plain proxy call. */
  if (isatty (STDIN_FILENO))
    flags |= G_DBUS_CALL_FLAGS_ALLOW_INTERACTIVE_AUTHORIZATION;
  /* No time limit: vblkd answers once the block node exists. */
  return g_dbus_proxy_call_sync (G_DBUS_PROXY (proxy), method, parameters, flags, G_MAXINT, NULL,
                                 error);
}

GVariant *
vb_mgr_parse_assignments (const char *command, const char *const *assignments)
{
  g_auto (GVariantBuilder) builder = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE ("a{ss}"));
  g_autoptr (GHashTable) seen = g_hash_table_new_full (g_str_hash, g_str_equal, g_free, NULL);

  for (gsize i = 0; assignments != NULL && assignments[i] != NULL; i++)
    {
      const char *text = assignments[i];
      const char *eq = strchr (text, '=');
      char *key;

      if (eq == NULL || eq == text)
        {
          vb_mgr_usage_error (command, _ ("'%s': expected KEY=VALUE"), text);
          return NULL;
        }
      key = g_strndup (text, eq - text);
      if (!g_hash_table_add (seen, key))
        {
          vb_mgr_usage_error (command, _ ("attribute '%s' is given twice"), key);
          return NULL;
        }
      g_variant_builder_add (&builder, "{ss}", key, eq + 1);
    }
  return g_variant_ref_sink (g_variant_builder_end (&builder));
}

char *
vb_mgr_absolute_source (const char *source)
{
  const char *scheme = g_uri_peek_scheme (source);

  /* An empty source goes as it is: vblkd names the mistake. */
  if (*source == '\0' || g_path_is_absolute (source) || g_str_has_prefix (source, "vblk:")
      || (scheme != NULL && g_str_has_prefix (scheme, "nbd")))
    return g_strdup (source);
  return g_canonicalize_filename (source, NULL);
}

void
vb_mgr_print_json (JsonNode *root)
{
  g_autoptr (JsonGenerator) generator = json_generator_new ();
  g_autofree char *text = NULL;

  json_generator_set_pretty (generator, TRUE);
  json_generator_set_root (generator, root);
  text = json_generator_to_data (generator, NULL);
  g_print ("%s\n", text);
}

void
vb_mgr_print_json_list (GDBusObjectManager *manager, GPtrArray *items, VbMgrToJsonFunc to_json)
{
  g_autoptr (JsonBuilder) builder = json_builder_new ();
  g_autoptr (JsonNode) root = NULL;

  json_builder_begin_array (builder);
  for (guint i = 0; i < items->len; i++)
    to_json (builder, manager, items->pdata[i]);
  json_builder_end_array (builder);
  root = json_builder_get_root (builder);
  vb_mgr_print_json (root);
}

int
main (int argc, char **argv)
{
  const char *name;

  setlocale (LC_ALL, "");
  bindtextdomain (GETTEXT_PACKAGE, LOCALEDIR);
  bind_textdomain_codeset (GETTEXT_PACKAGE, "UTF-8");
  textdomain (GETTEXT_PACKAGE);
  g_set_prgname ("vbmgr");
  /* Registers the org.vblk.VBlk1.Error.* names before any call. */
  (void) vb_error_quark ();

  if (argc < 2)
    return vb_mgr_usage_error (NULL, _ ("missing command"));
  name = argv[1];
  if (strcmp (name, "--help") == 0 || strcmp (name, "-h") == 0 || strcmp (name, "help") == 0)
    {
      g_autofree char *text = vb_mgr_commands_text ();

      g_print ("%s", text);
      return VB_EXIT_OK;
    }
  if (strcmp (name, "--version") == 0)
    {
      g_print ("vbmgr %s\n", VB_VERSION);
      return VB_EXIT_OK;
    }
  for (gsize i = 0; i < G_N_ELEMENTS (vb_mgr_commands); i++)
    if (strcmp (name, vb_mgr_commands[i].name) == 0)
      return vb_mgr_commands[i].run (argc - 1, argv + 1);

  if (name[0] == '-')
    return vb_mgr_usage_error (NULL, _ ("unknown option '%s'"), name);
  return vb_mgr_usage_error (NULL, _ ("unknown command '%s'"), name);
}
