#include <stdio.h>

void gnome_sort(int a[], int n) {
    int i = 0;
    while (i < n) {
        if (i == 0 || a[i - 1] <= a[i]) {
            i++;
        } else {
            int t = a[i];
            a[i] = a[i - 1];
            a[i - 1] = t;
            i--;
        }
    }
}

int main(void) {
    int a[] = {5, 2, 9, 1, 7};
    gnome_sort(a, 5);
    for (int i = 0; i < 5; i++) printf("%d\n", a[i]);
    return 0;
}
