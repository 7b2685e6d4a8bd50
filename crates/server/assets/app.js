// The dashboard (placeholder; the dashboard fills this in).
