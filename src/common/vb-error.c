/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* VB_ERROR and its D-Bus names. */
#include "vb-error.h"

#include <gio/gio.h>
#include <string.h>

static const GDBusErrorEntry vb_error_entries[] = {
  { VB_ERROR_NOT_AUTHORIZED, "org.vblk.VBlk1.Error.NotAuthorized" },
  { VB_ERROR_INVALID_ARGUMENT, "org.vblk.VBlk1.Error.InvalidArgument" },
  { VB_ERROR_NOT_FOUND, "org.vblk.VBlk1.Error.NotFound" },
  { VB_ERROR_ALREADY_EXISTS, "org.vblk.VBlk1.Error.AlreadyExists" },
  { VB_ERROR_BUSY, "org.vblk.VBlk1.Error.Busy" },
  { VB_ERROR_WOULD_LOSE_DATA, "org.vblk.VBlk1.Error.WouldLoseData" },
  { VB_ERROR_DEPENDENCY_CYCLE, "org.vblk.VBlk1.Error.DependencyCycle" },
  { VB_ERROR_NOT_SUPPORTED, "org.vblk.VBlk1.Error.NotSupported" },
  { VB_ERROR_FAILED, "org.vblk.VBlk1.Error.Failed" },
};

G_STATIC_ASSERT (G_N_ELEMENTS (vb_error_entries) == VB_ERROR_FAILED + 1);

GQuark
vb_error_quark (void)
{
  static gsize quark = 0;

  g_dbus_error_register_error_domain ("vb-error-quark", &quark, vb_error_entries,
                                      G_N_ELEMENTS (vb_error_entries));
  return (GQuark) quark;
}

const char *
vb_error_short_name (VbErrorCode code)
{
  const char *dot;

  if ((guint) code >= G_N_ELEMENTS (vb_error_entries))
    return NULL;
  dot = strrchr (vb_error_entries[code].dbus_error_name, '.');
  return dot + 1;
}
