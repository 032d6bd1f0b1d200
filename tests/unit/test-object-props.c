/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GetManagedObjects' properties of a Device and a Component object
 * (src/daemon/bus/vb-object-props.c): the same as the generated
 * skeletons give, unset and set, so that a property added to the XML and
 * not there fails here. */
#include "config.h"

#include <glib.h>

#include "vb-object-props.h"

typedef GVariant *(*PropsFunc) (GDBusInterfaceSkeleton *);

static PropsFunc generated_device, generated_component;

static void
assert_same (GVariant *generated, GVariant *ours)
{
  g_autofree char *a = g_variant_print (generated, TRUE);
  g_autofree char *b = g_variant_print (ours, TRUE);

  g_assert_cmpstr (a, ==, b);
  g_assert_true (g_variant_equal (generated, ours));
}

static void
check (GDBusInterfaceSkeleton *skeleton, PropsFunc generated, PropsFunc ours)
{
  g_autoptr (GVariant) a = g_variant_ref_sink (generated (skeleton));
  g_autoptr (GVariant) b = g_variant_ref_sink (ours (skeleton));
  GDBusInterfaceInfo *info = g_dbus_interface_skeleton_get_info (skeleton);
  guint n = 0;

  assert_same (a, b);
  /* every readable property of the interface is there */
  while (info->properties[n])
    n++;
  g_assert_cmpuint (g_variant_n_children (b), ==, n);
}

static void
test_device (void)
{
  g_autoptr (VbDBusDevice) d = vb_dbus_device_skeleton_new ();
  const char *const components[] = { "/org/vblk/VBlk1/devices/a/components/0", NULL };
  const char *const exports[] = { "nbd:unix:/run/x.sock", "nbd:tcp:[::1]:10809", NULL };
  GVariantBuilder attributes;

  check (G_DBUS_INTERFACE_SKELETON (d), generated_device, vb_object_props_device);
  g_variant_builder_init (&attributes, G_VARIANT_TYPE ("a{ss}"));
  g_variant_builder_add (&attributes, "{ss}", "chunk", "65536");
  g_variant_builder_add (&attributes, "{ss}", "bitmap_chunk", "1M");
  vb_dbus_device_set_name (d, "a");
  vb_dbus_device_set_uuid (d, "0bc6e2c8-4a9c-4f47-9d7e-6a3cf1d0e7a1");
  vb_dbus_device_set_driver (d, "raid1");
  vb_dbus_device_set_attributes (d, g_variant_builder_end (&attributes));
  vb_dbus_device_set_backend (d, "engine");
  vb_dbus_device_set_backend_reason (d, "auto: the kernel has no md");
  vb_dbus_device_set_state (d, "degraded");
  vb_dbus_device_set_block_device (d, "/dev/ublkb0");
  vb_dbus_device_set_size (d, G_GUINT64_CONSTANT (1) << 40);
  vb_dbus_device_set_components (d, components);
  vb_dbus_device_set_dependents (d, components);
  vb_dbus_device_set_autostart (d, TRUE);
  vb_dbus_device_set_exports (d, exports);
  vb_dbus_device_set_previous_configuration (d, "linear");
  check (G_DBUS_INTERFACE_SKELETON (d), generated_device, vb_object_props_device);
}

static void
test_component (void)
{
  g_autoptr (VbDBusComponent) c = vb_dbus_component_skeleton_new ();

  check (G_DBUS_INTERFACE_SKELETON (c), generated_component, vb_object_props_component);
  vb_dbus_component_set_source (c, "/srv/a.img");
  vb_dbus_component_set_role (c, "spare");
  vb_dbus_component_set_state (c, "faulty");
  vb_dbus_component_set_errors (c, 7);
  vb_dbus_component_set_device (c, "/org/vblk/VBlk1/devices/a");
  check (G_DBUS_INTERFACE_SKELETON (c), generated_component, vb_object_props_component);
}

/* Installed, the classes answer with ours. */
static void
test_installed (void)
{
  g_autoptr (VbDBusDevice) d = vb_dbus_device_skeleton_new ();
  g_autoptr (GVariant) props = NULL;

  vb_dbus_device_set_name (d, "b");
  vb_object_props_install ();
  vb_object_props_install ();
  props = g_dbus_interface_skeleton_get_properties (G_DBUS_INTERFACE_SKELETON (d));
  assert_same (props, vb_object_props_device (G_DBUS_INTERFACE_SKELETON (d)));
  g_assert_true (G_DBUS_INTERFACE_SKELETON_CLASS (g_type_class_peek (VB_DBUS_TYPE_DEVICE_SKELETON))
                     ->get_properties
                 == vb_object_props_device);
}

int
main (int argc, char **argv)
{
  g_test_init (&argc, &argv, NULL);
  g_log_set_always_fatal (G_LOG_LEVEL_CRITICAL);
  generated_device
      = G_DBUS_INTERFACE_SKELETON_CLASS (g_type_class_ref (VB_DBUS_TYPE_DEVICE_SKELETON))
            ->get_properties;
  generated_component
      = G_DBUS_INTERFACE_SKELETON_CLASS (g_type_class_ref (VB_DBUS_TYPE_COMPONENT_SKELETON))
            ->get_properties;
  g_test_add_func ("/object-props/device", test_device);
  g_test_add_func ("/object-props/component", test_component);
  g_test_add_func ("/object-props/installed", test_installed);
  return g_test_run ();
}
