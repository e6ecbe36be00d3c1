# SPDX-License-Identifier: BSD-2-Clause
# Plots for bench/ab.  The harness writes a whitespace table whose first
# row names the columns (x, then one column per series) and calls
#   gnuplot -e "data='F.dat'; out='F.png'; ttl='...'; ylab='...'; kind='lines'" ab-plot.gp
# kind=lines: one line per series against concurrency (log x, since the
# ladder is 50, 200, 1000); kind=bars: clustered bars per size class;
# kind=time: one line per series against seconds (the footprint's samples);
# kind=workers: pairs of series against the number of workers (log x and y), each
# pair in one colour, the first solid, the second dashed.

set terminal pngcairo size 900,520 font ",10"
set output out
set title ttl
set ylabel ylab
set key outside right top
set grid ytics
set yrange [0:*]
set datafile missing "NaN"
ncols = system(sprintf("head -n 1 '%s' | wc -w", data)) + 0

# gnuplot 5.4 has no "else if": the other kinds nest.
if (kind eq "lines") {
    set xlabel "connections"
    set logscale x
    plot for [i=2:ncols] data using 1:i:xtic(1) with linespoints lw 2 pt 7 title columnheader(i)
} else {
    if (kind eq "workers") {
        set xlabel "workers"
        set logscale x 2
        # The peers reach hundreds of MiB where the pool and glibc stay near ten.
        set logscale y
        set yrange [*:*]
        plot for [i=2:ncols] data using 1:i:xtic(1) with linespoints lw 2 pt 7 \
            lc i / 2 dt 1 + i % 2 title columnheader(i)
    } else {
        if (kind eq "time") {
            set xlabel "seconds"
            set grid xtics
            plot for [i=2:ncols] data using 1:i with lines lw 2 title columnheader(i)
        } else {
            set xlabel "size class, bytes"
            set style data histograms
            set style histogram clustered gap 1
            set style fill solid 0.8 border -1
            set xtics rotate by -45
            plot for [i=2:ncols] data using i:xtic(1) title columnheader(i)
        }
    }
}
