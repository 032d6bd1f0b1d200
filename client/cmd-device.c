/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr commands that change a device: create, set, add, start, stop,
 * delete. Each maps to one vblkd method; vblkd validates, so this file only
 * checks the shape of the command line and makes component paths
 * absolute. */
#include "config.h"

#include "vbmgr.h"

#include <glib/gi18n.h>

/* Component sources as vblkd wants them (NULL-terminated). */
static char **
vb_mgr_absolute_sources (char **sources, int n)
{
  GPtrArray *result = g_ptr_array_new ();

  for (int i = 0; i < n; i++)
    g_ptr_array_add (result, vb_mgr_absolute_source (sources[i]));
  g_ptr_array_add (result, NULL);
  return (char **) g_ptr_array_free (result, FALSE);
}

int
vb_cmd_create (int argc, char **argv)
{
  g_autofree char *driver = NULL;
  g_autofree char *backend = NULL;
  g_auto (GStrv) attrs = NULL;
  gboolean start = FALSE;
  gboolean no_autostart = FALSE;
  const GOptionEntry entries[]
      = { { "driver", 0, 0, G_OPTION_ARG_STRING, &driver,
            N_ ("What the device does with its components (file, window, …)"), N_ ("DRIVER") },
          { "attr", 0, 0, G_OPTION_ARG_STRING_ARRAY, &attrs,
            N_ ("Set an attribute of the driver (repeatable)"), N_ ("KEY=VALUE") },
          { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
            N_ ("How the started device becomes a block node (default: auto)"), N_ ("BACKEND") },
          { "start", 0, 0, G_OPTION_ARG_NONE, &start, N_ ("Start the device once it is created"),
            NULL },
          { "no-autostart", 0, 0, G_OPTION_ARG_NONE, &no_autostart,
            N_ ("Do not start the device at boot"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusManager) iface = NULL;
  g_autoptr (GVariant) attributes = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GStrv) components = NULL;
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const char *name;

  if (!vb_mgr_parse_options ("create", "NAME COMPONENT…",
                             _ ("Create a device from its components."), entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc < 2)
    return vb_mgr_usage_error ("create", _ ("missing device name"));
  if (driver == NULL)
    return vb_mgr_usage_error ("create", _ ("missing --driver"));
  name = argv[1];
  attributes = vb_mgr_parse_assignments ("create", (const char *const *) attrs);
  if (attributes == NULL)
    return VB_EXIT_USAGE;
  /* The number of components is the driver's business: vblkd says what is
   * wrong with it, so none is not a usage error here. */
  components = vb_mgr_absolute_sources (argv + 2, argc - 2);

  if (backend != NULL)
    g_variant_builder_add (&options, "{sv}", "backend", g_variant_new_string (backend));
  if (start)
    g_variant_builder_add (&options, "{sv}", "start", g_variant_new_boolean (TRUE));
  if (no_autostart)
    g_variant_builder_add (&options, "{sv}", "autostart", g_variant_new_boolean (FALSE));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  iface = vb_mgr_get_manager (manager, "create", name);
  if (iface == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (iface, "CreateDevice",
                       g_variant_new ("(ss@a{ss}^as@a{sv})", name, driver, attributes, components,
                                      g_variant_builder_end (&options)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail ("create", name, error);
  return VB_EXIT_OK;
}

int
vb_cmd_set (int argc, char **argv)
{
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  g_autoptr (GVariant) attributes = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  const char *name;

  if (!vb_mgr_parse_options ("set", "NAME KEY=VALUE…", _ ("Change attributes of a device."), NULL,
                             &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc < 2)
    return vb_mgr_usage_error ("set", _ ("missing device name"));
  if (argc < 3)
    return vb_mgr_usage_error ("set", _ ("missing KEY=VALUE"));
  name = argv[1];
  attributes = vb_mgr_parse_assignments ("set", (const char *const *) argv + 2);
  if (attributes == NULL)
    return VB_EXIT_USAGE;

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  device = vb_mgr_lookup_device (manager, "set", name);
  if (device == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (device, "SetAttributes",
                       g_variant_new ("(@a{ss}@a{sv})", attributes, g_variant_new ("a{sv}", NULL)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail ("set", name, error);
  return VB_EXIT_OK;
}

int
vb_cmd_add (int argc, char **argv)
{
  gboolean spare = FALSE;
  const GOptionEntry entries[] = { { "spare", 0, 0, G_OPTION_ARG_NONE, &spare,
                                     N_ ("Add the component as a hot spare"), NULL },
                                   G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_autofree char *source = NULL;
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const char *name;

  if (!vb_mgr_parse_options ("add", "NAME COMPONENT", _ ("Add a component to a device."), entries,
                             &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc < 2)
    return vb_mgr_usage_error ("add", _ ("missing device name"));
  if (argc < 3)
    return vb_mgr_usage_error ("add", _ ("missing component"));
  if (argc > 3)
    return vb_mgr_usage_error ("add", _ ("unexpected argument '%s'"), argv[3]);
  name = argv[1];
  source = vb_mgr_absolute_source (argv[2]);
  if (spare)
    g_variant_builder_add (&options, "{sv}", "role", g_variant_new_string ("spare"));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  device = vb_mgr_lookup_device (manager, "add", name);
  if (device == NULL)
    return VB_EXIT_FAILED;
  reply
      = vb_mgr_call (device, "AddComponent",
                     g_variant_new ("(s@a{sv})", source, g_variant_builder_end (&options)), &error);
  if (reply == NULL)
    return vb_mgr_fail ("add", name, error);
  return VB_EXIT_OK;
}

/* start, stop and delete: "COMMAND NAME [--recursive]" -> METHOD(options). */
static int
vb_mgr_run_lifecycle (int argc, char **argv, const char *command, const char *method,
                      const char *summary, const char *recursive_help)
{
  gboolean recursive = FALSE;
  const GOptionEntry entries[]
      = { { "recursive", 0, 0, G_OPTION_ARG_NONE, &recursive, recursive_help, NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const char *name;

  if (!vb_mgr_parse_options (command, "NAME", summary, entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc < 2)
    return vb_mgr_usage_error (command, _ ("missing device name"));
  if (argc > 2)
    return vb_mgr_usage_error (command, _ ("unexpected argument '%s'"), argv[2]);
  name = argv[1];
  if (recursive)
    g_variant_builder_add (&options, "{sv}", "recursive", g_variant_new_boolean (TRUE));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  device = vb_mgr_lookup_device (manager, command, name);
  if (device == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (device, method, g_variant_new ("(@a{sv})", g_variant_builder_end (&options)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail (command, name, error);
  return VB_EXIT_OK;
}

int
vb_cmd_start (int argc, char **argv)
{
  return vb_mgr_run_lifecycle (
      argc, argv, "start", "Start", _ ("Start a device: its block node exists when this returns."),
      N_ ("Also start the devices it is built from (they are started anyway)"));
}

int
vb_cmd_stop (int argc, char **argv)
{
  return vb_mgr_run_lifecycle (argc, argv, "stop", "Stop", _ ("Stop a device."),
                               N_ ("First stop the devices built on it"));
}

int
vb_cmd_delete (int argc, char **argv)
{
  return vb_mgr_run_lifecycle (argc, argv, "delete", "Delete",
                               _ ("Delete a device (it is stopped first when started)."),
                               N_ ("First delete the devices built on it"));
}

int
vb_cmd_reconfigure (int argc, char **argv)
{
  g_autofree char *driver = NULL;
  g_autofree char *backend = NULL;
  g_auto (GStrv) attrs = NULL;
  g_auto (GStrv) add = NULL;
  g_auto (GStrv) remove = NULL;
  gint timeout = 0;
  const GOptionEntry entries[]
      = { { "driver", 0, 0, G_OPTION_ARG_STRING, &driver,
            N_ ("The driver the device turns into (default: the one it has)"), N_ ("DRIVER") },
          { "attr", 0, 0, G_OPTION_ARG_STRING_ARRAY, &attrs,
            N_ ("Set an attribute of the new driver (repeatable)"), N_ ("KEY=VALUE") },
          { "add", 0, 0, G_OPTION_ARG_STRING_ARRAY, &add,
            N_ ("Add a component (a new leg, or one appended; repeatable)"), N_ ("COMPONENT") },
          { "remove", 0, 0, G_OPTION_ARG_STRING_ARRAY, &remove,
            N_ ("Remove a component (repeatable)"), N_ ("COMPONENT") },
          { "backend", 0, 0, G_OPTION_ARG_STRING, &backend,
            N_ ("Move the device to another backend (a stopped device only)"), N_ ("BACKEND") },
          { "timeout", 0, 0, G_OPTION_ARG_INT, &timeout,
            N_ ("Give up when the requests in flight take longer to drain (default 10000)"),
            N_ ("MILLISECONDS") },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  g_autoptr (GVariant) attributes = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);
  const char *name;

  if (!vb_mgr_parse_options ("reconfigure", "NAME",
                             _ ("Change the driver or the components of a device; a started "
                                "device stays in use (its block node stays)."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc < 2)
    return vb_mgr_usage_error ("reconfigure", _ ("missing device name"));
  if (argc > 2)
    return vb_mgr_usage_error ("reconfigure", _ ("unexpected argument '%s'"), argv[2]);
  if (timeout < 0)
    return vb_mgr_usage_error ("reconfigure", _ ("--timeout: must not be negative"));
  name = argv[1];
  attributes = vb_mgr_parse_assignments ("reconfigure", (const char *const *) attrs);
  if (attributes == NULL)
    return VB_EXIT_USAGE;
  if (add)
    {
      g_auto (GStrv) abs = vb_mgr_absolute_sources (add, (int) g_strv_length (add));
      g_variant_builder_add (&options, "{sv}", "add",
                             g_variant_new_strv ((const char *const *) abs, -1));
    }
  if (remove)
    {
      g_auto (GStrv) abs = vb_mgr_absolute_sources (remove, (int) g_strv_length (remove));
      g_variant_builder_add (&options, "{sv}", "remove",
                             g_variant_new_strv ((const char *const *) abs, -1));
    }
  if (backend)
    g_variant_builder_add (&options, "{sv}", "backend", g_variant_new_string (backend));
  if (timeout > 0)
    g_variant_builder_add (&options, "{sv}", "timeout", g_variant_new_uint32 ((guint32) timeout));

  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  device = vb_mgr_lookup_device (manager, "reconfigure", name);
  if (device == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (device, "Reconfigure",
                       g_variant_new ("(s@a{ss}@a{sv})", driver ? driver : "", attributes,
                                      g_variant_builder_end (&options)),
                       &error);
  if (reply == NULL)
    return vb_mgr_fail ("reconfigure", name, error);
  return VB_EXIT_OK;
}
