package main

// The IANA time zone database, built in: a budget's calendar window is in
// a named zone (Europe/Berlin), and a container image without
// /usr/share/zoneinfo would otherwise refuse every such budget.
import _ "time/tzdata"
