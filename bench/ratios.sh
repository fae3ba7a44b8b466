# ratios.sh: sourced by bench/host_latency.sh and bench/host_ab.sh. Both
# read numbers, one a line, on standard input.
#   median      their median
#   median_ci   a distribution-free 95% confidence interval of the median:
#               the k-th smallest and k-th largest of n, k = floor((n -
#               1.96 sqrt(n)) / 2) (at least 1); with fewer than 6 values
#               it spans them all
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
median_ci() { sort -g | awk '{a[NR]=$1} END {k = int((NR - 1.96 * sqrt(NR)) / 2); if (k < 1) k = 1; printf "%.3f–%.3f", a[k], a[NR - k + 1]}'; }
