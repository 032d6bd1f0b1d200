/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The properties of a Device or Component object as GetManagedObjects
 * gives them. The generated skeletons answer each property through
 * GObject's property machinery (found by name, copied to a GValue,
 * converted): most of the call's time at 10,000 devices. These answer
 * from the typed getters, in the interface's order; test-object-props
 * checks them against the generated ones. Main thread. */
#pragma once

#include "vb-dbus-generated.h"

G_BEGIN_DECLS

/* Puts the two below in the skeleton classes' place (once). */
void vb_object_props_install (void);

GVariant *vb_object_props_device (GDBusInterfaceSkeleton *skeleton);
GVariant *vb_object_props_component (GDBusInterfaceSkeleton *skeleton);

G_END_DECLS
