/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* vbmgr commands for engine devices: fail (a component, SetFaulty),
 * remove (a spare or replaced component), check (compare the copies) and
 * export (serve a device over NBD). */
#include "config.h"

#include "vbmgr.h"
#include "vb-error.h"

#include <glib/gi18n.h>

/* The component of @device whose source is @which (a path is made
 * absolute first) or whose index is @which. */
static VbDBusComponent *
find_component (GDBusObjectManager *manager, VbDBusDevice *device, const char *which)
{
  const char *const *paths = vb_dbus_device_get_components (device);
  g_autofree char *source = vb_mgr_absolute_source (which);

  for (guint i = 0; paths && paths[i]; i++)
    {
      g_autoptr (VbDBusComponent) c = vb_mgr_lookup_component (manager, paths[i]);
      g_autofree char *index = g_strdup_printf ("%u", i);
      if (c
          && (g_strcmp0 (vb_dbus_component_get_source (c), source) == 0
              || g_strcmp0 (which, index) == 0))
        return g_steal_pointer (&c);
    }
  return NULL;
}

/* `vbmgr CMD NAME COMPONENT`: calls @method (a{sv}) on the component. */
static int
component_command (const char *cmd, const char *summary, const char *method, int argc, char **argv)
{
  const GOptionEntry entries[] = { G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  g_autoptr (VbDBusComponent) component = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;

  if (!vb_mgr_parse_options (cmd, "NAME COMPONENT", summary, entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc != 3)
    return vb_mgr_usage_error (cmd, _ ("expected a device name and a component"));
  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  device = vb_mgr_lookup_device (manager, cmd, argv[1]);
  if (device == NULL)
    return VB_EXIT_FAILED;
  component = find_component (manager, device, argv[2]);
  if (component == NULL)
    {
      g_set_error (&error, VB_ERROR, VB_ERROR_NOT_FOUND, _ ("'%s' has no component '%s'"), argv[1],
                   argv[2]);
      return vb_mgr_fail (cmd, argv[1], error);
    }
  reply = vb_mgr_call (component, method, g_variant_new ("(a{sv})", NULL), &error);
  if (reply == NULL)
    return vb_mgr_fail (cmd, argv[1], error);
  return VB_EXIT_OK;
}

int
vb_cmd_fail (int argc, char **argv)
{
  return component_command ("fail", _ ("Mark a component of a redundant device faulty."),
                            "SetFaulty", argc, argv);
}

int
vb_cmd_remove (int argc, char **argv)
{
  return component_command ("remove", _ ("Remove a spare, or a component a spare replaced."),
                            "Remove", argc, argv);
}

/* Starts a check of @device; prints "NAME: JOB". With @skip_unfit (the
 * --all sweep) a device that cannot be checked (no copies to compare, not
 * started, another job running) is said and skipped; returns FALSE only
 * on a refusal of another kind. */
static gboolean
vb_mgr_start_check (VbDBusDevice *device, gboolean repair, gboolean skip_unfit, gboolean named)
{
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  GVariantBuilder options;
  const char *name = vb_dbus_device_get_name (device);
  const char *job = NULL;

  g_variant_builder_init (&options, G_VARIANT_TYPE_VARDICT);
  if (repair)
    g_variant_builder_add (&options, "{sv}", "repair", g_variant_new_boolean (TRUE));
  reply = vb_mgr_call (device, "Check", g_variant_new ("(a{sv})", &options), &error);
  if (reply == NULL && skip_unfit
      && (g_error_matches (error, VB_ERROR, VB_ERROR_NOT_SUPPORTED)
          || g_error_matches (error, VB_ERROR, VB_ERROR_BUSY)))
    {
      g_dbus_error_strip_remote_error (error);
      g_print (_ ("%s: skipped: %s\n"), name, error->message);
      return TRUE;
    }
  if (reply == NULL)
    {
      vb_mgr_fail ("check", name, error);
      return FALSE;
    }
  g_variant_get (reply, "(&o)", &job);
  if (named)
    g_print ("%s: %s\n", name, job);
  else
    g_print ("%s\n", job);
  return TRUE;
}

int
vb_cmd_check (int argc, char **argv)
{
  gboolean repair = FALSE, all = FALSE;
  const GOptionEntry entries[] = {
    { "repair", 0, 0, G_OPTION_ARG_NONE, &repair, N_ ("Rewrite mismatching copies from the first"),
      NULL },
    { "all", 0, 0, G_OPTION_ARG_NONE, &all,
      N_ ("Check every started device that has copies to compare (what the monthly timer runs)"),
      NULL },
    G_OPTION_ENTRY_NULL,
  };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusDevice) device = NULL;

  if (!vb_mgr_parse_options ("check", "NAME|--all [--repair]",
                             _ ("Compare every copy of a redundant device (a scrub); prints the "
                                "job, see vbmgr wait. With --all, every started device: one line "
                                "NAME: JOB each, or NAME: skipped: WHY for a device with nothing "
                                "to compare or another job running."),
                             entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (all ? argc != 1 : argc != 2)
    return vb_mgr_usage_error ("check", all ? _ ("--all takes no device name")
                                            : _ ("expected a device name"));
  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  if (all)
    {
      g_autoptr (GPtrArray) devices = vb_mgr_list_devices (manager);
      gboolean ok = TRUE;

      for (guint i = 0; i < devices->len; i++)
        {
          const char *state = vb_dbus_device_get_state (devices->pdata[i]);
          if (g_strcmp0 (state, "active") == 0 || g_strcmp0 (state, "degraded") == 0)
            ok &= vb_mgr_start_check (devices->pdata[i], repair, TRUE, TRUE);
        }
      return ok ? VB_EXIT_OK : VB_EXIT_FAILED;
    }
  device = vb_mgr_lookup_device (manager, "check", argv[1]);
  if (device == NULL)
    return VB_EXIT_FAILED;
  return vb_mgr_start_check (device, repair, FALSE, FALSE) ? VB_EXIT_OK : VB_EXIT_FAILED;
}

/* vblkd reads the file: a relative @path is of where vbmgr runs, not vblkd. */
static void
add_path_option (GVariantBuilder *options, const char *key, const char *path)
{
  g_autofree char *absolute = NULL;

  if (path == NULL)
    return;
  absolute = g_canonicalize_filename (path, NULL);
  g_variant_builder_add (options, "{sv}", key, g_variant_new_string (absolute));
}

int
vb_cmd_export (int argc, char **argv)
{
  gboolean nbd = FALSE;
  g_autofree char *listen = NULL;
  g_autofree char *tls = NULL;
  g_autofree char *tls_psk = NULL;
  g_autofree char *tls_certs = NULL;
  gboolean stop = FALSE;
  const GOptionEntry entries[]
      = { { "nbd", 0, 0, G_OPTION_ARG_NONE, &nbd, N_ ("Serve over NBD"), NULL },
          { "listen", 0, 0, G_OPTION_ARG_STRING, &listen,
            N_ ("Where to listen: unix:PATH or tcp:HOST:PORT (default: a socket in vblkd's run "
                "directory)"),
            N_ ("ADDRESS") },
          { "tls", 0, 0, G_OPTION_ARG_STRING, &tls,
            N_ ("Whether clients must use TLS: require (the default on TCP and with "
                "credentials), allow or off"),
            N_ ("MODE") },
          { "tls-psk", 0, 0, G_OPTION_ARG_FILENAME, &tls_psk,
            N_ ("TLS with the pre-shared keys of this file (USERNAME:HEXKEY lines, as psktool "
                "writes them; mode 0600)"),
            N_ ("FILE") },
          { "tls-certs", 0, 0, G_OPTION_ARG_FILENAME, &tls_certs,
            N_ ("TLS with the X.509 certificate of this directory (server-cert.pem, "
                "server-key.pem; ca-cert.pem to require client certificates)"),
            N_ ("DIRECTORY") },
          { "stop", 0, 0, G_OPTION_ARG_NONE, &stop, N_ ("Stop serving on that address"), NULL },
          G_OPTION_ENTRY_NULL };
  g_autoptr (GDBusObjectManager) manager = NULL;
  g_autoptr (VbDBusDevice) device = NULL;
  g_autoptr (GVariant) reply = NULL;
  g_autoptr (GError) error = NULL;
  g_auto (GVariantBuilder) options = G_VARIANT_BUILDER_INIT (G_VARIANT_TYPE_VARDICT);

  if (!vb_mgr_parse_options ("export",
                             "NAME --nbd [--listen ADDRESS] [--tls MODE] [--tls-psk FILE | "
                             "--tls-certs DIRECTORY] [--stop]",
                             _ ("Serve a started device to the network."), entries, &argc, &argv))
    return VB_EXIT_USAGE;
  if (argc != 2)
    return vb_mgr_usage_error ("export", _ ("expected one device name"));
  if (!nbd)
    return vb_mgr_usage_error ("export", _ ("missing --nbd (the only protocol)"));
  if (listen)
    g_variant_builder_add (&options, "{sv}", "listen", g_variant_new_string (listen));
  if (stop)
    g_variant_builder_add (&options, "{sv}", "stop", g_variant_new_boolean (TRUE));
  if (tls)
    g_variant_builder_add (&options, "{sv}", "tls", g_variant_new_string (tls));
  add_path_option (&options, "tls-psk", tls_psk);
  add_path_option (&options, "tls-certs", tls_certs);
  manager = vb_mgr_connect ();
  if (manager == NULL)
    return VB_EXIT_FAILED;
  device = vb_mgr_lookup_device (manager, "export", argv[1]);
  if (device == NULL)
    return VB_EXIT_FAILED;
  reply = vb_mgr_call (device, "Export", g_variant_new ("(sa{sv})", "nbd", &options), &error);
  if (reply == NULL)
    return vb_mgr_fail ("export", argv[1], error);
  return VB_EXIT_OK;
}
