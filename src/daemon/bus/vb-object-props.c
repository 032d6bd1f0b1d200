/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Device and Component properties from the typed getters (vb-object-props.h). */
#include "config.h"

#include "vb-object-props.h"

static const char *
str (const char *s)
{
  return s ? s : "";
}

static GVariant *
strv (const char *const *v, const char *type)
{
  static const char *const none[] = { NULL };

  return g_str_equal (type, "ao") ? g_variant_new_objv (v ? v : none, -1)
                                  : g_variant_new_strv (v ? v : none, -1);
}

static void
add (GVariantBuilder *b, const char *name, GVariant *value)
{
  g_variant_builder_add (b, "{sv}", name, value);
}

GVariant *
vb_object_props_device (GDBusInterfaceSkeleton *skeleton)
{
  VbDBusDevice *d = VB_DBUS_DEVICE (skeleton);
  GVariant *attributes = vb_dbus_device_get_attributes (d);
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  add (&b, "Name", g_variant_new_string (str (vb_dbus_device_get_name (d))));
  add (&b, "UUID", g_variant_new_string (str (vb_dbus_device_get_uuid (d))));
  add (&b, "Driver", g_variant_new_string (str (vb_dbus_device_get_driver (d))));
  add (&b, "Attributes",
       attributes ? attributes : g_variant_new_array (G_VARIANT_TYPE ("{ss}"), NULL, 0));
  add (&b, "Backend", g_variant_new_string (str (vb_dbus_device_get_backend (d))));
  add (&b, "BackendReason", g_variant_new_string (str (vb_dbus_device_get_backend_reason (d))));
  add (&b, "State", g_variant_new_string (str (vb_dbus_device_get_state (d))));
  add (&b, "BlockDevice", g_variant_new_string (str (vb_dbus_device_get_block_device (d))));
  add (&b, "Size", g_variant_new_uint64 (vb_dbus_device_get_size (d)));
  add (&b, "Components", strv (vb_dbus_device_get_components (d), "ao"));
  add (&b, "Dependents", strv (vb_dbus_device_get_dependents (d), "ao"));
  add (&b, "Autostart", g_variant_new_boolean (vb_dbus_device_get_autostart (d)));
  add (&b, "Exports", strv (vb_dbus_device_get_exports (d), "as"));
  add (&b, "PreviousConfiguration",
       g_variant_new_string (str (vb_dbus_device_get_previous_configuration (d))));
  return g_variant_builder_end (&b);
}

GVariant *
vb_object_props_component (GDBusInterfaceSkeleton *skeleton)
{
  VbDBusComponent *c = VB_DBUS_COMPONENT (skeleton);
  const char *device = vb_dbus_component_get_device (c);
  GVariantBuilder b;

  g_variant_builder_init (&b, G_VARIANT_TYPE_VARDICT);
  add (&b, "Source", g_variant_new_string (str (vb_dbus_component_get_source (c))));
  add (&b, "Role", g_variant_new_string (str (vb_dbus_component_get_role (c))));
  add (&b, "State", g_variant_new_string (str (vb_dbus_component_get_state (c))));
  add (&b, "Errors", g_variant_new_uint64 (vb_dbus_component_get_errors (c)));
  add (&b, "Device", g_variant_new_object_path (device ? device : "/"));
  return g_variant_builder_end (&b);
}

void
vb_object_props_install (void)
{
  static gsize once = 0;

  if (g_once_init_enter (&once))
    {
      GDBusInterfaceSkeletonClass *device = g_type_class_ref (VB_DBUS_TYPE_DEVICE_SKELETON);
      GDBusInterfaceSkeletonClass *component = g_type_class_ref (VB_DBUS_TYPE_COMPONENT_SKELETON);
      device->get_properties = vb_object_props_device;
      component->get_properties = vb_object_props_component;
      g_once_init_leave (&once, 1);
    }
}
