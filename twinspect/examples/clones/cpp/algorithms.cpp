// algorithms.cpp - assorted helpers; some were copied from matrix.hpp / matrix.cpp.
#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "matrix.hpp"

template <typename Item>
std::size_t first_not_less(const std::vector<Item> &items, const Item &probe) {
    std::size_t left = 0, right = items.size();
    while (left < right) {
        std::size_t middle = left + (right - left) / 2;
        if (items[middle] < probe)
            left = middle + 1;
        else
            right = middle;
    }
    return left;
}

// Same as split() in matrix.cpp, reformatted.
std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> parts;
    std::string::size_type start = 0;
    for (;;)
    {
        std::string::size_type pos = s.find(sep, start);
        if (pos == std::string::npos) { parts.push_back(s.substr(start)); break; }
        parts.push_back(s.substr(start, pos - start));
        start = pos + 1;
    }
    return parts;
}

linalg::Matrix multiply(const linalg::Matrix &a, const linalg::Matrix &b) {
    linalg::Matrix result(a.rows(), b.cols());
    for (std::size_t i = 0; i < a.rows(); ++i) {
        for (std::size_t j = 0; j < b.cols(); ++j) {
            double sum = 0.0;
            for (std::size_t k = 0; k < a.cols(); ++k) {
                sum += a.at(i, k) * b.at(k, j);
            }
            result.at(i, j) = sum;
        }
    }
    return result;
}

void sort_by_length(std::vector<std::string> &words) {
    std::stable_sort(words.begin(), words.end(),
                     [](const std::string &x, const std::string &y) {
                         if (x.size() != y.size())
                             return x.size() < y.size();
                         return x < y;
                     });
}
