"""Small measured data ppsweep ships with its source (each file names where it comes from)."""
